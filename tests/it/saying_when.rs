//! Saying when (API 1d), as a receiver and a client see it: interval
//! timers with a run limit, spread fires keeping their scheduled identity,
//! calendars, the preview's notes, the forecast and the 400s.

use std::time::Duration;

use serde_json::{json, Value};
use xtimer::receiver::Receiver;

use crate::helpers::{every_second, now_ms, wait_for, Stack, Storage, TestNode, PATIENCE};

fn msg(reply: &Value) -> String {
    reply["msg"].as_str().unwrap_or_default().to_owned()
}

pub async fn an_interval_timer_with_max_fires_fires_that_many_then_completes(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(true).await.unwrap();
    let anchor = now_ms() + 1_500;
    let id = app
        .create_ok(json!({
            "app": "it", "name": "thrice", "everyMs": 1_000, "anchorAt": anchor, "maxFires": 3, "status": 2,
            "notifyHTTPParam": {"url": rx.url("/hook")}, "retry": {"maxAttempts": 1, "backoffMs": 0}
        }))
        .await;
    let timer = app.get(&format!("getTimer?id={id}&app=it")).await;
    assert_eq!(timer["result"]["everyMs"], 1_000, "{timer}");
    assert_eq!(timer["result"]["firesLeft"], 3, "{timer}");
    assert!(rx.wait_until(PATIENCE, |hits| hits.len() >= 3).await, "three fires");
    let last_arrival = rx.hits().iter().map(|h| h.arrival_us / 1000).max().unwrap();
    // Completed within a moment of the last fire's result, not at the next migrator step.
    let done = wait_for("the timer completes", || async {
        let timer = app.get(&format!("getTimer?id={id}&app=it")).await;
        (timer["result"]["status"] == 4).then(now_ms)
    })
    .await;
    assert!(done - last_arrival < 3_000, "completed {} ms after its last fire", done - last_arrival);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let hits = rx.hits();
    let runs: Vec<i64> = hits.iter().map(|h| h.run_ms).collect();
    assert_eq!(runs, vec![anchor, anchor + 1_000, anchor + 2_000], "anchorAt + k * everyMs, exactly three");
    let timer = app.get(&format!("getTimer?id={id}&app=it")).await;
    assert_eq!(timer["result"]["firesLeft"], 0, "{timer}");
    app.stop().await;
}

/// `maxFires` and `endAt` hold across a restart mid-way: the limit is
/// stored with the timer, not counted by the node.
pub async fn a_run_limit_and_an_end_survive_a_restart(stack: Stack) {
    let storage = Storage::new(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let first = TestNode::spawn_with(storage.config.clone()).await;
    let anchor = now_ms() + 1_500;
    let body = |name: &str, extra: Value| {
        let mut body = json!({"app": "it", "name": name, "everyMs": 1_000, "anchorAt": anchor, "status": 2,
                              "notifyHTTPParam": {"url": rx.url(&format!("/{name}"))},
                              "retry": {"maxAttempts": 1, "backoffMs": 0}});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    first.create_ok(body("limited", json!({"maxFires": 5}))).await;
    first.create_ok(body("ending", json!({"endAt": anchor + 5_000}))).await;
    assert!(rx.wait_until(PATIENCE, |h| h.len() >= 4).await);
    first.stop().await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let second = TestNode::spawn_with(storage.config.clone()).await;
    tokio::time::sleep(Duration::from_millis((anchor + 9_000 - now_ms()).max(0) as u64)).await;
    let mut by_timer: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    for hit in rx.hits() {
        by_timer.entry(hit.key.split('_').next().unwrap().to_owned()).or_default().push(hit.run_ms);
    }
    assert_eq!(by_timer.len(), 2, "{by_timer:?}");
    for runs in by_timer.values_mut() {
        runs.sort_unstable();
        assert_eq!(*runs, (0..5).map(|k| anchor + k * 1_000).collect::<Vec<_>>(), "exactly five, none lost, none more");
    }
    second.stop().await;
}

pub async fn spread_fires_are_placed_flat_and_keep_their_scheduled_identity(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(true).await.unwrap();
    let timers: Vec<Value> = (0..20)
        .map(|i| {
            json!({
                "app": "it", "name": format!("herd-{i}"), "cron": "*/10 * * * * *", "spreadMs": 5_000, "status": 2,
                "notifyHTTPParam": {"url": rx.url("/hook")}, "retry": {"maxAttempts": 1, "backoffMs": 0}
            })
        })
        .collect();
    let made = app.post("createTimers", json!({ "timers": timers })).await;
    assert_eq!(made["code"], 0, "{made}");
    let ids: Vec<i64> = made["result"]["ids"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    // The first round as planned: each fire within [scheduled, scheduled + 5 s), four to a second.
    let mut per_second = std::collections::BTreeMap::<i64, u32>::new();
    let mut first_round = None;
    for id in &ids {
        let fires = app.fires(*id, "it").await;
        let fire = fires.iter().find(|f| f["status"] == 0).expect("a planned fire");
        let (scheduled, run) = (fire["scheduledTimer"].as_i64().unwrap(), fire["runTimer"].as_i64().unwrap());
        assert_eq!(scheduled % 10_000, 0, "{fire}");
        assert!(run >= scheduled && run < scheduled + 5_000, "{fire}");
        first_round.get_or_insert(scheduled);
        if Some(scheduled) == first_round {
            *per_second.entry(run / 1000).or_default() += 1;
        }
    }
    assert!(per_second.values().all(|n| *n <= 4), "at most 20 / 5 a second: {per_second:?}");
    let forecast = app.get("getForecast?app=it&seconds=60").await;
    assert_eq!(forecast["code"], 0, "{forecast}");
    assert!(forecast["result"]["peak"]["fires"].as_u64().unwrap() <= 4, "{forecast}");
    assert!(forecast["result"]["total"].as_u64().unwrap() >= 20, "{forecast}");
    // Sent at its placed time, named by its scheduled one.
    assert!(rx.wait_until(PATIENCE, |hits| hits.len() >= 20).await, "the first round arrives");
    for hit in rx.hits().iter().take(20) {
        let headers = hit.headers.as_ref().unwrap();
        let scheduled: i64 = headers["x-xtimer-scheduled-time"].to_str().unwrap().parse().unwrap();
        assert_eq!(scheduled % 10_000, 0);
        assert!(hit.run_ms >= scheduled && hit.run_ms < scheduled + 5_000);
        assert!(hit.key.ends_with(&format!("_{scheduled}")), "Idempotency-Key {} names the scheduled time", hit.key);
    }
    let hits = rx.hits();
    let keys: std::collections::HashSet<&str> = hits.iter().map(|h| h.key.as_str()).collect();
    assert_eq!(keys.len(), hits.len(), "no fire twice");
    app.stop().await;
}

/// 30 timers fill the first 30 seconds after a time; a 31st with a 50 s
/// spread is placed at the first empty one, 30 s in. `updateTimer` to a
/// 5 s spread places its fire again, inside the new window, and it
/// arrives there.
pub async fn an_update_of_the_spread_places_the_fire_inside_the_new_window(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let at = (now_ms() / 1000 + 20) * 1000;
    let body = |name: String, spread: i64| {
        json!({"app": "it", "name": name, "everyMs": 3_600_000, "anchorAt": at, "spreadMs": spread, "status": 2,
               "notifyHTTPParam": {"url": rx.url("/hook")}, "retry": {"maxAttempts": 1, "backoffMs": 0}})
    };
    let fillers: Vec<Value> = (0..30).map(|i| body(format!("filler-{i}"), 30_000)).collect();
    let made = app.post("createTimers", json!({ "timers": fillers })).await;
    assert_eq!(made["code"], 0, "{made}");
    let id = app.create_ok(body("moved".into(), 50_000)).await;
    let planned = |fires: Vec<Value>| {
        let runs: Vec<i64> =
            fires.iter().filter(|f| f["scheduledTimer"] == at).map(|f| f["runTimer"].as_i64().unwrap()).collect();
        assert_eq!(runs.len(), 1, "one fire of the scheduled time: {fires:?}");
        runs[0]
    };
    assert_eq!(planned(app.fires(id, "it").await), at + 30_000, "the first second no filler took");
    let reply = app.post("updateTimer", json!({"id": id, "app": "it", "spreadMs": 5_000})).await;
    assert_eq!(reply["code"], 0, "{reply}");
    assert!(now_ms() < at - 1_000, "updated before the window opens");
    let run = planned(app.fires(id, "it").await);
    assert!((at..at + 5_000).contains(&run), "placed again in [at, at + 5 s): {}", run - at);
    let key = format!("{id}_{at}");
    let until_sent = Duration::from_millis((at + 5_000 - now_ms()).max(0) as u64) + PATIENCE;
    assert!(rx.wait_until(until_sent, |hits| hits.iter().any(|h| h.key == key)).await, "the fire arrives");
    let hit = rx.hits().into_iter().find(|h| h.key == key).unwrap();
    assert_eq!(hit.run_ms, run);
    assert!(
        hit.arrival_us / 1000 < at + 5_000 + 500,
        "arrived {} ms after the window's end",
        hit.arrival_us / 1000 - at - 5_000
    );
    app.stop().await;
}

/// 3,000 timers on the same `0 * * * * ?` with a minute's spread are
/// planned flat: at most 60 (50 on average) in any second of the minute,
/// all within it, as `getForecast` shows before the minute starts.
pub async fn three_thousand_aligned_crons_with_a_minute_of_spread_are_planned_flat(stack: Stack) {
    // Made well before the minute turns, so every first fire is that minute's.
    let second = now_ms() / 1000 % 60;
    if second > 45 {
        tokio::time::sleep(Duration::from_secs((61 - second) as u64)).await;
    }
    let app = TestNode::spawn(stack).await;
    let minute = (now_ms() / 60_000 + 1) * 60_000;
    for batch in 0..3 {
        let timers: Vec<Value> = (0..1_000)
            .map(|i| {
                json!({"app": "herd", "name": format!("t{batch}-{i}"), "cron": "0 * * * * ?", "spreadMs": 60_000,
                       "status": 2, "notifyHTTPParam": {"url": "http://127.0.0.1:9/"}})
            })
            .collect();
        let made = app.post("createTimers", json!({ "timers": timers })).await;
        assert_eq!(made["code"], 0, "{made}");
    }
    let forecast = app.get(&format!("getForecast?app=herd&from={minute}&seconds=60")).await;
    let result = &forecast["result"];
    assert_eq!(result["total"], 3_000, "every fire within its minute: {forecast}");
    let per_second: Vec<u64> = result["perSecond"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    assert!(per_second.iter().all(|n| *n <= 60), "at most 60 a second instead of 3,000 in one: {per_second:?}");
    assert!(result["peak"]["fires"].as_u64().unwrap() <= 60, "{forecast}");
    app.stop().await;
}

/// After a 10 s outage, a timer with `misfireThresholdMs: 5000` and
/// `misfire: skip` marks its fires more than 5 s late missed, where the
/// node's default window (60 s) fires every one of them.
pub async fn a_timers_own_catch_up_window_applies_after_an_outage(stack: Stack) {
    let storage = Storage::new(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let first = TestNode::spawn_with(storage.config.clone()).await;
    let own =
        first.create_ok(every_second("own-window", &rx, json!({"misfire": "skip", "misfireThresholdMs": 5_000}))).await;
    let node = first.create_ok(every_second("node-window", &rx, json!({"misfire": "skip"}))).await;
    assert!(rx.wait_until(PATIENCE, |h| h.len() >= 4).await);
    first.stop().await;
    let stopped_at = now_ms();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let second = TestNode::spawn_with(storage.config.clone()).await;
    let restarted_at = now_ms();
    let outage = |f: &&Value| (stopped_at + 1_000..restarted_at - 6_000).contains(&f["runTimer"].as_i64().unwrap());
    let settled = |fires: &[Value]| fires.iter().filter(outage).all(|f| f["status"] != 0 && f["status"] != 1);
    let (own_fires, node_fires) = wait_for("the outage's fires are settled", || async {
        let (a, b) = (second.fires(own, "it").await, second.fires(node, "it").await);
        (settled(&a) && settled(&b)).then_some((a, b))
    })
    .await;
    let statuses =
        |fires: &[Value]| fires.iter().filter(outage).map(|f| f["status"].as_i64().unwrap()).collect::<Vec<_>>();
    let (own_statuses, node_statuses) = (statuses(&own_fires), statuses(&node_fires));
    assert!(own_statuses.len() >= 2, "{own_statuses:?}");
    assert!(
        own_statuses.iter().all(|s| *s == 5),
        "more than 5 s late: missed, per the timer's policy: {own_statuses:?}"
    );
    assert!(node_statuses.iter().all(|s| *s == 2), "within the node's 60 s: fired: {node_statuses:?}");
    second.stop().await;
}

/// A calendar changed after its timers were planned: their fires not yet
/// claimed follow it at once.
pub async fn a_calendar_change_replans_the_timers_that_exclude_it(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let put = |ranges: Value| app.post("putCalendar", json!({"app": "it", "name": "quiet", "ranges": ranges}));
    assert_eq!(put(json!([])).await["code"], 0);
    let id = app
        .create_ok(json!({"app": "it", "name": "ticks", "cron": "* * * * * *", "status": 2,
                          "excludeCalendars": ["quiet"], "notifyHTTPParam": {"url": "http://127.0.0.1:9/"}}))
        .await;
    let from = (now_ms() / 1000 + 30) * 1000;
    let planned_in = |fires: &[Value]| {
        fires.iter().filter(|f| (from..from + 10_000).contains(&f["runTimer"].as_i64().unwrap())).count()
    };
    assert_eq!(planned_in(&app.fires(id, "it").await), 10, "planned before the change");
    let changed = put(json!([{"from": from, "to": from + 10_000}])).await;
    assert_eq!(changed["code"], 0, "{changed}");
    let fires = app.fires(id, "it").await;
    assert_eq!(planned_in(&fires), 0, "the excluded range lost its fires");
    assert!(fires.iter().any(|f| f["runTimer"].as_i64().unwrap() >= from + 10_000), "the rest stay planned");
    app.stop().await;
}

pub async fn calendars_exclude_days_and_stay_while_used(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let put = app
        .post(
            "putCalendar",
            json!({"app": "it", "name": "holidays", "dates": ["2031-01-02"], "weekdays": ["SUN"],
                   "ics": "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//t//EN\r\nBEGIN:VEVENT\r\nUID:x\r\nDTSTAMP:20260101T000000Z\r\nDTSTART;VALUE=DATE:20261225\r\nRRULE:FREQ=YEARLY\r\nSUMMARY:Christmas\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"}),
        )
        .await;
    assert_eq!(put["result"]["name"], "holidays", "{put}");
    let got = app.get("getCalendar?app=it&name=holidays").await;
    assert_eq!(got["result"]["dates"], json!(["2031-01-02"]), "{got}");
    assert_eq!(app.get("getAppCalendars?app=it").await["result"]["list"].as_array().unwrap().len(), 1);
    // Preview: every yearly Christmas and the listed day are noted, not skipped silently.
    let preview = app
        .get("previewCron?cron=0%200%2012%20*%20*%20%3F&from=2030-12-24T13:00:00Z&count=4&app=it&excludeCalendars=holidays")
        .await;
    let notes: Vec<(String, Value)> = preview["result"]["list"]
        .as_array()
        .unwrap_or_else(|| panic!("{preview}"))
        .iter()
        .map(|f| (f["runTime"].as_str().unwrap()[..10].to_owned(), f["note"].clone()))
        .collect();
    assert_eq!(
        notes,
        vec![
            ("2030-12-25".into(), json!("excluded:holidays")),
            ("2030-12-26".into(), Value::Null),
            ("2030-12-27".into(), Value::Null),
            ("2030-12-28".into(), Value::Null),
        ]
    );
    let unknown = app
        .create(json!({"app": "it", "name": "u", "cron": "0 0 12 * * ?", "excludeCalendars": ["nope"],
                       "notifyHTTPParam": {"url": "http://127.0.0.1:9/"}}))
        .await;
    assert!(msg(&unknown).starts_with("excludeCalendars[0]: no calendar `nope`"), "{unknown}");
    let id = app
        .create_ok(json!({"app": "it", "name": "noon", "cron": "0 0 12 * * ?", "excludeCalendars": ["holidays"],
                          "notifyHTTPParam": {"url": "http://127.0.0.1:9/"}}))
        .await;
    // Its next fire skips what the calendar excludes (Sundays, the listed day, Christmas).
    app.act("enableTimer", id, "it").await;
    let timer = app.get(&format!("getTimer?id={id}&app=it")).await;
    let today = chrono::Utc::now().date_naive();
    let expected = (0..14)
        .map(|d| today + chrono::Days::new(d))
        .map(|day| day.and_hms_opt(12, 0, 0).unwrap().and_utc())
        .find(|noon| {
            use chrono::Datelike;
            noon.timestamp_millis() > now_ms()
                && noon.weekday() != chrono::Weekday::Sun
                && !(noon.month() == 12 && noon.day() == 25)
                && noon.date_naive() != chrono::NaiveDate::from_ymd_opt(2031, 1, 2).unwrap()
        })
        .unwrap();
    assert_eq!(timer["result"]["nextRunTimer"], expected.timestamp_millis(), "{timer}");
    // Bounds and limits are cleared by null, kept when absent.
    let limited = app
        .post("updateTimer", json!({"id": id, "app": "it", "endAt": now_ms() + 86_400_000 * 30, "maxFires": 5}))
        .await;
    assert_eq!(limited["result"]["maxFires"], 5, "{limited}");
    assert_eq!(limited["result"]["excludeCalendars"], json!(["holidays"]), "kept when absent: {limited}");
    let cleared = app.post("updateTimer", json!({"id": id, "app": "it", "endAt": null, "maxFires": null})).await;
    assert!(cleared["result"].get("endAt").is_none() && cleared["result"].get("maxFires").is_none(), "{cleared}");
    let refused =
        app.http.delete(format!("{}/api/xtimer/delCalendar?app=it&name=holidays", app.base)).send().await.unwrap();
    assert_eq!(refused.status(), 400);
    let refused: Value = refused.json().await.unwrap();
    assert!(msg(&refused).contains(&format!("{id} (noon)")), "{refused}");
    app.act("delTimer", id, "it").await;
    let deleted: Value = app
        .http
        .delete(format!("{}/api/xtimer/delCalendar?app=it&name=holidays", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(deleted["code"], 0, "{deleted}");
    assert_eq!(app.get("getCalendar?app=it&name=holidays").await["code"], 404);
    app.stop().await;
}

pub async fn saying_when_refuses_bad_input_naming_the_field(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let base = json!({"app": "it", "name": "bad", "notifyHTTPParam": {"url": "http://127.0.0.1:9/"}});
    let now = now_ms();
    let cases = [
        (json!({"everyMs": 500}), "everyMs: must be at least 1000"),
        (json!({"everyMs": 5_000, "cron": "* * * * *"}), "cron, runAt, everyMs: give exactly one"),
        (json!({"cron": "* * * * *", "startAt": now + 10_000, "endAt": now + 5_000}), "endAt: must be after startAt"),
        (json!({"runAt": now + 60_000, "endAt": now + 30_000}), "is outside [startAt, endAt)"),
        (json!({"cron": "* * * * *", "maxFires": 0}), "maxFires: must be 1 to"),
        (json!({"cron": "* * * * *", "spreadMs": 3_600_001}), "spreadMs: must be 0 to 3600000"),
        (json!({"cron": "* * * * *", "misfireThresholdMs": 10}), "misfireThresholdMs: must be 1000 to"),
    ];
    for (extra, want) in cases {
        let mut body = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let reply = app.create(body).await;
        assert!(msg(&reply).contains(want), "want `{want}`: {reply}");
    }
    let ics = app.post("putCalendar", json!({"app": "it", "name": "c", "ics": "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART:nonsense\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"})).await;
    assert!(msg(&ics).starts_with("ics: line"), "{ics}");
    app.stop().await;
}

crate::on_both_stacks!(
    an_interval_timer_with_max_fires_fires_that_many_then_completes,
    a_run_limit_and_an_end_survive_a_restart,
    spread_fires_are_placed_flat_and_keep_their_scheduled_identity,
    three_thousand_aligned_crons_with_a_minute_of_spread_are_planned_flat,
    an_update_of_the_spread_places_the_fire_inside_the_new_window,
    a_timers_own_catch_up_window_applies_after_an_outage,
    a_calendar_change_replans_the_timers_that_exclude_it,
    calendars_exclude_days_and_stay_while_used,
    saying_when_refuses_bad_input_naming_the_field,
);
