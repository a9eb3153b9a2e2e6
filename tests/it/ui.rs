//! The web console in a real browser: headless Chromium (Debian's
//! `chromium`) loads each page from a running node with real timers and
//! fires, and the test reads what a person would see in the DOM after the
//! page's scripts ran. Screenshots of each page go to
//! `/tmp/xtimer-ui-shots/`. Without `chromium` the test is skipped with a
//! message, except under CI (`CI` set), which installs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use xtimer::receiver::Receiver;
use xtimer_core::config::Secret;

use crate::helpers::{every_second, test_config, wait_for, TestNode};

const SHOTS: &str = "/tmp/xtimer-ui-shots";

fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var_os("PATH")?.to_str()?.split(':').map(|dir| Path::new(dir).join(name)).find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "chromium is missing under CI: .ci/run installs it");
        eprintln!("SKIPPED: the console's browser test needs `chromium` (apt-get install chromium)");
    }
    found
}

/// Loads `url` in headless Chromium; returns the DOM after scripts ran, and
/// saves a screenshot as `{SHOTS}/{name}.png`.
async fn browse(browser: &Path, url: &str, name: &str) -> String {
    let (browser, url, name) = (browser.to_owned(), url.to_owned(), name.to_owned());
    tokio::task::spawn_blocking(move || {
        let run = |extra: &[String]| {
            let profile = tempfile::tempdir().unwrap();
            let mut args: Vec<String> = [
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--virtual-time-budget=5000",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.push(format!("--user-data-dir={}", profile.path().display()));
            args.extend(extra.iter().cloned());
            args.push(url.clone());
            Command::new(&browser).args(&args).output().expect("chromium runs")
        };
        std::fs::create_dir_all(SHOTS).unwrap();
        let shot = format!("{SHOTS}/{name}.png");
        let out = run(&[format!("--screenshot={shot}"), "--window-size=1280,900".into()]);
        assert!(Path::new(&shot).is_file(), "no screenshot: {}", String::from_utf8_lossy(&out.stderr));
        let out = run(&["--dump-dom".into()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
    .await
    .unwrap()
}

/// The text of the table or list with `id` (its tags stripped), or empty.
fn section(dom: &str, id: &str) -> String {
    let Some(start) = dom.find(&format!("id=\"{id}\"")) else { return String::new() };
    let rest = &dom[start..];
    let end = ["</table>", "</dl>"].iter().filter_map(|close| rest.find(close)).min().unwrap_or(rest.len());
    let mut text = String::new();
    let mut in_tag = false;
    for c in rest[..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_page_shows_the_nodes_timers_and_fires() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::spawn_with(test_config(&dir.path().join("ui.db"))).await;
    let rx = Receiver::start(false).await.unwrap();
    let ok = node.create_ok(every_second("nightly-invoice", &rx, json!({"app": "billing"}))).await;
    let mut failing = every_second("broken-webhook", &rx, json!({"app": "billing"}));
    failing["notifyHTTPParam"]["url"] = json!(format!("http://{}/no-such-hook", node.node.addr));
    let bad = node.create_ok(failing).await;
    node.create_ok(json!({"app": "billing", "name": "quarterly-report", "cron": "0 0 9 1 */3 *",
        "timezone": "Europe/Berlin", "notifyHTTPParam": {"url": rx.url("/q")}}))
        .await;
    let v1 = |p: &str| format!("{}/v1/{p}", node.base);
    let reply: Value = node
        .http
        .post(v1("register_task"))
        .json(&json!({"task_type": "ui_demo"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["code"], 0, "{reply}");
    let task = json!({"task_data": {"task_type": "ui_demo", "user_id": "u", "task_stage": "s", "context": "{}"}});
    node.http.post(v1("create_task")).json(&task).send().await.unwrap();
    wait_for("a succeeded and a failed fire", || async {
        let ok_fires = node.fires(ok, "billing").await;
        let bad_fires = node.fires(bad, "billing").await;
        (ok_fires.iter().any(|f| f["status"] == 2) && bad_fires.iter().any(|f| f["status"] == 3)).then_some(())
    })
    .await;
    let ui = format!("{}/ui", node.base);

    let dom = browse(&browser, &format!("{ui}#/timers?app=billing"), "timers").await;
    let timers = section(&dom, "timers");
    assert!(timers.contains("nightly-invoice") && timers.contains("broken-webhook"), "{timers}");
    assert!(timers.contains("quarterly-report disabled 0 0 9 1 */3 * Europe/Berlin"), "{timers}");
    assert!(timers.contains(&format!("{ok} nightly-invoice enabled * * * * * * UTC")), "{timers}");
    let dom = browse(&browser, &format!("{ui}#/timers?app=billing&q=broken"), "timers-search").await;
    let timers = section(&dom, "timers");
    assert!(timers.contains("broken-webhook") && !timers.contains("nightly-invoice"), "{timers}");

    let dom = browse(&browser, &format!("{ui}#/timer/billing/{ok}"), "timer").await;
    assert!(dom.contains("nightly-invoice") && dom.contains("Disable") && dom.contains("Run now"), "{dom}");
    let history = section(&dom, "fires");
    assert!(history.contains("succeeded") && history.contains("200"), "{history}");
    let next = section(&dom, "next-fires");
    // previewCron's times, in the timer's zone (UTC here: +00:00).
    assert!(next.contains("Run time (UTC)") && next.matches("+00:00").count() >= 5, "{next}");

    let dom = browse(&browser, &format!("{ui}#/lateness"), "lateness").await;
    assert!(dom.contains("<polyline"), "the chart has its lines: {dom}");
    let failing = section(&dom, "failing");
    assert!(failing.contains("broken-webhook") && failing.contains("404"), "{failing}");
    assert!(!failing.contains("nightly-invoice"), "{failing}");

    let dom = browse(&browser, &format!("{ui}#/cluster"), "cluster").await;
    let nodes = section(&dom, "nodes");
    assert!(nodes.contains(&node.node.node_id), "{nodes}");
    let types = section(&dom, "task-types");
    assert!(types.contains("ui_demo 1"), "{types}");
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auth_on_the_console_asks_for_a_token() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(&dir.path().join("auth.db"));
    config.auth.enabled = true;
    config.auth.admin_token = Secret::new("admin-secret-token-0123456789");
    let node = TestNode::spawn_with(config).await;
    let dom = browse(&browser, &format!("{}/ui#/cluster", node.base), "token").await;
    let form = dom.split("id=\"token-form\"").nth(1).expect("the token form");
    let tag = &form[..form.find('>').unwrap()];
    assert!(!tag.contains("hidden"), "the token form shows: {tag}");
    assert!(dom.contains("This server has auth on"), "{dom}");
    assert!(!dom.contains("id=\"nodes\""), "nothing is shown without a token");
    node.stop().await;
}

/// Saying when (API 1d) in the console: an interval timer's every field on
/// its page and in its edit form, an app's calendars, its forecast, and a
/// spread fire's scheduled time beside the time it was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_when_timers_fire_calendars_and_the_forecast() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::spawn_with(test_config(&dir.path().join("when.db"))).await;
    let rx = Receiver::start(false).await.unwrap();
    let post = |route: &str, body: Value| {
        let request = node.http.post(format!("{}/api/xtimer/{route}", node.base)).json(&body);
        async move {
            let reply: Value = request.send().await.unwrap().json().await.unwrap();
            assert_eq!(reply["code"], 0, "{reply}");
            reply["result"].clone()
        }
    };
    let ics = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20270501\r\nRRULE:FREQ=YEARLY\r\n\
               SUMMARY:May day\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
    post(
        "putCalendar",
        json!({"app": "ops", "name": "holidays", "dates": ["2026-12-25", "2030-01-01"], "weekdays": ["SUN"], "ics": ics}),
    )
    .await;
    let sweeper = post(
        "createTimer",
        json!({"app": "ops", "name": "sweeper", "everyMs": 90_000, "anchorAt": "2030-01-01T00:00:30Z",
            "startAt": "2030-01-01T00:00:00Z", "endAt": "2031-01-01T00:00:00Z", "maxFires": 500, "spreadMs": 30_000,
            "excludeCalendars": ["holidays"], "misfireThresholdMs": 120_000, "timezone": "Europe/Berlin", "status": 2,
            "notifyHTTPParam": {"url": rx.url("/sweep")}}),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    // Six timers every two seconds, spread over two: three fires a second,
    // so some are sent a second after their scheduled time.
    let herd: Vec<Value> = (0..6)
        .map(|i| {
            json!({"app": "ops", "name": format!("herd-{i}"), "cron": "*/2 * * * * *", "spreadMs": 2_000, "status": 2,
                "notifyHTTPParam": {"url": rx.url("/herd")}, "retry": {"maxAttempts": 1, "backoffMs": 0}})
        })
        .collect();
    let ids = post("createTimers", json!({ "timers": herd })).await["ids"].clone();
    let (spread_id, spread_fire) = wait_for("a fire sent after its scheduled time", || async {
        for id in ids.as_array().unwrap().iter().map(|v| v.as_i64().unwrap()) {
            let fire = node
                .fires(id, "ops")
                .await
                .into_iter()
                .find(|f| f["status"] == 2 && f["scheduledTimer"] != f["runTimer"]);
            if let Some(fire) = fire {
                return Some((id, fire));
            }
        }
        None
    })
    .await;
    let ui = format!("{}/ui", node.base);

    let dom = browse(&browser, &format!("{ui}#/timers?app=ops"), "when-timers").await;
    let timers = section(&dom, "timers");
    assert!(timers.contains(&format!("{sweeper} sweeper enabled every 90 s Europe/Berlin")), "{timers}");
    assert!(timers.contains("herd-0 enabled */2 * * * * * UTC"), "{timers}");
    let calendars = section(&dom, "calendars");
    assert!(calendars.contains("holidays SUN 2026-12-25 2030-01-01 - 1 event"), "{calendars}");
    assert!(dom.contains("id=\"calendar-form\""), "a calendar can be put: {dom}");
    // The forecast: three herd fires a second, about 1,800 in ten minutes.
    let forecast = section(&dom, "forecast-summary");
    let number_after = |word: &str| -> u64 {
        let rest = forecast.split(word).nth(1).unwrap_or_else(|| panic!("{word} in {forecast}"));
        rest.split_whitespace().next().unwrap().parse().unwrap_or_else(|_| panic!("{forecast}"))
    };
    assert!(number_after("Peak") >= 1 && forecast.contains("fires in one second, at"), "{forecast}");
    assert!(number_after("Total") >= 600 && forecast.contains("fires in 10 minutes"), "{forecast}");
    assert!(dom.contains("aria-label=\"fires per second\"") && dom.contains("<rect"), "the forecast's bars: {dom}");
    // The create form takes every field that says when.
    let creator = dom.split("id=\"creator\"").nth(1).expect("the create form");
    for field in
        ["everyMs", "anchorAt", "startAt", "endAt", "maxFires", "spreadMs", "excludeCalendars", "misfireThresholdMs"]
    {
        assert!(creator.contains(&format!("name=\"{field}\"")), "{field} in the create form");
    }

    let dom = browse(&browser, &format!("{ui}#/timer/ops/{sweeper}"), "when-timer").await;
    let timer: Value = node
        .http
        .get(format!("{}/api/xtimer/getTimer?id={sweeper}&app=ops", node.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let definition = section(&dom, "definition");
    for shown in [
        "Schedule every 90 s (90000 ms from 2030-01-01T00:00:30Z)",
        "Starts 2030-01-01T00:00:00Z",
        "Ends before 2031-01-01T00:00:00Z",
        &format!("Max fires 500 ({} left)", timer["result"]["firesLeft"]),
        "Spread each fire sent within 30 s of its scheduled time",
        "Excluded calendars holidays",
        "Catch-up window 2 min",
    ] {
        assert!(definition.contains(shown), "{shown:?} in {definition}");
    }
    let editor = dom.split("id=\"editor\"").nth(1).expect("the edit form");
    for (field, value) in [
        ("everyMs", "90000"),
        ("anchorAt", "2030-01-01T00:00:30Z"),
        ("startAt", "2030-01-01T00:00:00Z"),
        ("endAt", "2031-01-01T00:00:00Z"),
        ("maxFires", "500"),
        ("spreadMs", "30000"),
        ("excludeCalendars", "holidays"),
        ("misfireThresholdMs", "120000"),
    ] {
        assert!(editor.contains(&format!("name=\"{field}\" value=\"{value}\"")), "{field}={value} in the edit form");
    }
    // previewCron with the timer's bounds and calendars: 1 January 2030 is excluded.
    let next = section(&dom, "next-fires");
    assert!(next.contains("2030-01-01T01:00:30+01:00 not fired: excluded by calendar holidays"), "{next}");

    let dom = browse(&browser, &format!("{ui}#/timer/ops/{spread_id}"), "when-spread").await;
    let fires = section(&dom, "fires");
    let (run, scheduled) = (spread_fire["runTimer"].as_i64().unwrap(), spread_fire["scheduledTimer"].as_i64().unwrap());
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let shown = format!("{} (scheduled {}, spread +{} s)", at(run), at(scheduled), (run - scheduled) / 1000);
    assert!(fires.contains(&shown), "{shown:?} in {fires}");
    node.stop().await;
}
