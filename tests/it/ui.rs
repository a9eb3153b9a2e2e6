//! The web console in a real browser: headless Chromium (Debian's
//! `chromium`) loads each page from a running node with real timers and
//! fires, and the test reads what a person would see in the DOM after the
//! page's scripts ran. Actions go through the page's own buttons: the
//! browser runs under automation (`--enable-automation`), where the
//! console's `set.{id}=` and `click=` hash parameters fill inputs and click
//! buttons; each test then checks both the page and the server's state.
//! Screenshots of each page go to `/tmp/xtimer-ui-shots/` (the ones in
//! `docs/` come from there). Without `chromium` the test is skipped with a
//! message, except under CI (`CI` set), which installs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use xtimer::receiver::Receiver;
use xtimer_core::config::Secret;

use crate::helpers::{every_second, now_ms, test_config, wait_for, TestNode};

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

/// Loads `url` in headless Chromium (1280 x 900); returns the DOM after
/// scripts ran, and saves a screenshot as `{SHOTS}/{name}.png`.
async fn browse(browser: &Path, url: &str, name: &str) -> String {
    browse_sized(browser, url, name, 900).await
}

/// [`browse`] in a window `height` pixels tall. One run takes both the
/// screenshot and the DOM, so an action in the URL runs once.
async fn browse_sized(browser: &Path, url: &str, name: &str, height: u32) -> String {
    let (browser, url, name) = (browser.to_owned(), url.to_owned(), name.to_owned());
    tokio::task::spawn_blocking(move || {
        let profile = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(SHOTS).unwrap();
        let shot = format!("{SHOTS}/{name}.png");
        let _ = std::fs::remove_file(&shot);
        let out = Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--enable-automation",
                "--virtual-time-budget=5000",
                &format!("--window-size=1280,{height}"),
                &format!("--user-data-dir={}", profile.path().display()),
                &format!("--screenshot={shot}"),
                "--dump-dom",
                &url,
            ])
            .output()
            .expect("chromium runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(Path::new(&shot).is_file(), "no screenshot: {}", String::from_utf8_lossy(&out.stderr));
        let dom = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!dom.contains("data-automation=\"missing"), "an element to fill or click is missing: {dom}");
        dom
    })
    .await
    .unwrap()
}

/// Text with its tags stripped and its spaces collapsed.
fn text(html: &str) -> String {
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
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
    text.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The text of the table or list with `id` (its tags stripped), or empty.
fn section(dom: &str, id: &str) -> String {
    let Some(start) = dom.find(&format!("id=\"{id}\"")) else { return String::new() };
    let rest = &dom[start..];
    let end = ["</table>", "</dl>"].iter().filter_map(|close| rest.find(close)).min().unwrap_or(rest.len());
    text(&rest[..end])
}

/// The text of the element with `id` (up to its own closing tag), or empty.
fn element(dom: &str, id: &str) -> String {
    let Some(at) = dom.find(&format!(" id=\"{id}\"")) else { return String::new() };
    let open = dom[..at].rfind('<').unwrap();
    let tag: String = dom[open + 1..].chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
    let opening = format!("<{tag}");
    let closing = format!("</{tag}>");
    // Tags of the same name opened inside it before its own close.
    let opens_at = |i: usize| {
        dom[i..]
            .match_indices(&opening)
            .map(|(n, _)| n + i)
            .find(|&n| matches!(dom.as_bytes().get(n + opening.len()), Some(b' ' | b'>')))
    };
    let (mut depth, mut i) = (0, open + 1);
    loop {
        let close = dom[i..].find(&closing).map(|n| n + i).expect("a closing tag");
        match opens_at(i) {
            Some(o) if o < close => {
                depth += 1;
                i = o + 1;
            }
            _ if depth > 0 => {
                depth -= 1;
                i = close + 1;
            }
            _ => return text(&dom[open..close]),
        }
    }
}

/// The validation message shown under the field `field` of form `form`.
fn field_error(dom: &str, form: &str, field: &str) -> String {
    let form = dom.split(&format!("id=\"{form}\"")).nth(1).unwrap_or_else(|| panic!("form {form}"));
    let label = form.split(&format!("data-field=\"{field}\"")).nth(1).unwrap_or_else(|| panic!("field {field}"));
    let slot = label.split("class=\"field-error\">").nth(1).unwrap();
    text(&slot[..slot.find("</span>").unwrap()])
}

/// `GET /api/xtimer/{route}?{query}`'s result, asserting success.
async fn get(node: &TestNode, route: &str, query: &str) -> Value {
    let reply: Value =
        node.http.get(format!("{}/api/xtimer/{route}?{query}", node.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(reply["code"], 0, "{route}: {reply}");
    reply["result"].clone()
}

/// A `/v1` call's reply, asserting code 0.
async fn v1(node: &TestNode, route: &str, body: Option<Value>) -> Value {
    let url = format!("{}/v1/{route}", node.base);
    let request = match body {
        Some(body) => node.http.post(url).json(&body),
        None => node.http.get(url),
    };
    let reply: Value = request.send().await.unwrap().json().await.unwrap();
    assert_eq!(reply["code"], 0, "{route}: {reply}");
    reply
}

/// One app of `getApps`.
async fn app_entry(node: &TestNode, app: &str) -> Value {
    let apps = get(node, "getApps", "").await;
    apps["list"].as_array().unwrap().iter().find(|a| a["app"] == app).cloned().unwrap_or(Value::Null)
}

/// `ms` as the console writes a UTC time.
fn utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Opening `/ui` lists the apps; an app's timers (a failing one marked);
/// a timer's definition, next fires and fires; lateness with gridlines
/// labelled where they stand; the nodes with their shards as ranges.
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
    wait_for("a succeeded and a failed fire", || async {
        let ok_fires = node.fires(ok, "billing").await;
        let bad_fires = node.fires(bad, "billing").await;
        (ok_fires.iter().any(|f| f["status"] == 2) && bad_fires.iter().any(|f| f["status"] == 3)).then_some(())
    })
    .await;
    let ui = format!("{}/ui", node.base);

    // The first page: the apps, without typing anything.
    let dom = browse(&browser, &ui, "apps").await;
    let apps = section(&dom, "apps");
    assert!(apps.contains("billing 3 2 no"), "the Paused column says whether it is: {apps}");

    let dom = browse(&browser, &format!("{ui}#/app/billing"), "timers").await;
    let timers = section(&dom, "timers");
    assert!(timers.contains("nightly-invoice") && timers.contains("broken-webhook"), "{timers}");
    assert!(timers.contains("quarterly-report disabled 0 0 9 1 */3 * Europe/Berlin"), "{timers}");
    assert!(timers.contains(&format!("{ok} nightly-invoice enabled * * * * * * UTC")), "{timers}");
    // The failing timer is marked; the healthy one is not.
    assert!(timers.contains(&format!("{bad} broken-webhook enabled failing")), "{timers}");
    assert!(!timers.contains(&format!("{ok} nightly-invoice enabled failing")), "{timers}");
    let dom = browse(&browser, &format!("{ui}#/app/billing?q=broken"), "timers-search").await;
    let timers = section(&dom, "timers");
    assert!(timers.contains("broken-webhook") && !timers.contains("nightly-invoice"), "{timers}");
    assert!(element(&dom, "list-count").contains("1 timer matches the search"), "{}", element(&dom, "list-count"));

    let dom = browse(&browser, &format!("{ui}#/timer/billing/{ok}"), "timer").await;
    assert!(dom.contains("nightly-invoice") && dom.contains("Disable") && dom.contains("Run now"), "{dom}");
    assert!(element(&dom, "health").is_empty(), "a healthy timer is not marked: {}", element(&dom, "health"));
    let history = section(&dom, "fires");
    assert!(history.contains("succeeded") && history.contains("200"), "{history}");
    let next = section(&dom, "next-fires");
    // previewCron's times, in the timer's zone (UTC here: +00:00).
    assert!(next.contains("Run time (UTC)") && next.matches("+00:00").count() >= 5, "{next}");
    let dom = browse(&browser, &format!("{ui}#/timer/billing/{bad}"), "timer-failing").await;
    let health = element(&dom, "health");
    assert!(health.starts_with("failing:") && health.contains("fires failed"), "{health}");

    let dom = browse(&browser, &format!("{ui}#/lateness"), "lateness").await;
    assert!(dom.contains("<polyline"), "the chart has its lines: {dom}");
    let failing = section(&dom, "failing");
    assert!(failing.contains("broken-webhook failing") && failing.contains("404"), "{failing}");
    assert!(!failing.contains("nightly-invoice"), "{failing}");
    // Each gridline's label is its value: 0, s, 2s, 3s, 4s ms, at heights
    // proportional to them.
    let ticks: Vec<(f64, f64)> = dom
        .split("class=\"ytick\"")
        .skip(1)
        .map(|t| {
            let y = t.split("y=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
            let label = &t[t.find('>').unwrap() + 1..t.find(" ms<").unwrap()];
            (label.replace(',', "").parse().unwrap_or_else(|_| panic!("label {label}")), y)
        })
        .collect();
    assert_eq!(ticks.len(), 5, "{ticks:?}");
    let step = ticks[1].0;
    let per_ms = (ticks[0].1 - ticks[1].1) / step;
    for (i, (value, y)) in ticks.iter().enumerate() {
        assert!((value - step * i as f64).abs() < 1e-9, "evenly spaced labels: {ticks:?}");
        assert!((ticks[0].1 - y - value * per_ms).abs() < 0.2, "each label at its value's height: {ticks:?}");
    }

    let dom = browse(&browser, &format!("{ui}#/cluster"), "cluster").await;
    let nodes = section(&dom, "nodes");
    assert!(nodes.contains(&node.node.node_id), "{nodes}");
    // Shards as ranges of buckets per minute, not a list of every one.
    assert!(nodes.contains("#0–") && !nodes.contains("#1,"), "{nodes}");
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
    let dom = browse(&browser, &format!("{ui}#/new?app=ops"), "when-new").await;
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

/// Operating many timers (API 1f) in the console: the apps page; an app's
/// timers searched server-side by label, with their labels and their next
/// fire in their own zone; a bad selector's message; a bulk action on the
/// search, its count shown first; pausing and resuming an app.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_searches_by_label_acts_on_the_search_and_pauses_an_app() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::spawn_with(test_config(&dir.path().join("many.db"))).await;
    let rx = Receiver::start(false).await.unwrap();
    let mut ids = Vec::new();
    for (name, team, zone) in [
        ("sync-a1", "a", "UTC"),
        ("sync-a2", "a", "Asia/Shanghai"),
        ("sync-a3", "a", "UTC"),
        ("report-b1", "b", "UTC"),
        ("report-b2", "b", "UTC"),
    ] {
        let id = node
            .create_ok(json!({"app": "it", "name": name, "cron": "0 0 9 * * *", "timezone": zone, "status": 2,
                "labels": {"team": team, "tier": "gold"}, "notifyHTTPParam": {"url": rx.url("/hook")}}))
            .await;
        ids.push(id);
    }
    let ui = format!("{}/ui", node.base);

    let dom = browse(&browser, &ui, "many-apps").await;
    assert!(section(&dom, "apps").contains("it 5 5 no"), "{}", section(&dom, "apps"));

    let search = format!("{ui}#/app/it?selector=team%3Da");
    let dom = browse(&browser, &search, "many-search").await;
    let timers = section(&dom, "timers");
    for name in ["sync-a1", "sync-a2", "sync-a3"] {
        assert!(timers.contains(name), "{name} in {timers}");
    }
    assert!(!timers.contains("report-b"), "{timers}");
    assert!(timers.contains("team=a tier=gold"), "the labels: {timers}");
    assert!(element(&dom, "list-count").starts_with("3 timers match the search"), "{}", element(&dom, "list-count"));
    // The next fire in UTC and in the timer's zone: 09:00 in Shanghai.
    let shanghai = get(&node, "getTimer", &format!("id={}&app=it", ids[1])).await;
    let next = shanghai["nextRunTimer"].as_i64().unwrap();
    let local = chrono::DateTime::from_timestamp_millis(next + 8 * 3_600_000).unwrap().format("%Y-%m-%d %H:%M:%S");
    let shown = format!("Asia/Shanghai {} {local} +08:00 Asia/Shanghai", utc(next));
    assert!(timers.contains(&shown), "{shown:?} in {timers}");
    assert!(local.to_string().ends_with("09:00:00"), "{local}");

    let dom = browse(&browser, &format!("{ui}#/app/it?selector=team%20in%20(a"), "many-bad-selector").await;
    let message = element(&dom, "selector-error");
    assert!(message.starts_with("selector: at character"), "{message}");

    // The count first, nothing changed yet.
    let dom = browse(&browser, &format!("{search}&click=bulk-disable"), "many-bulk-count").await;
    let count = element(&dom, "bulk-count");
    assert!(count.starts_with("Disable 3 timers of it matching labels team=a?"), "{count}");
    assert_eq!(app_entry(&node, "it").await["enabled"], 5, "a dry run changes nothing");
    // Then the action, on exactly those timers.
    let dom = browse(&browser, &format!("{search}&click=bulk-disable,bulk-confirm"), "many-bulk-done").await;
    let done = element(&dom, "bulk-result");
    assert_eq!(done, "Disabled 3 timers of the 3 matched.");
    assert!(section(&dom, "timers").matches("disabled").count() == 3, "the list shows them disabled");
    for (i, id) in ids.iter().enumerate() {
        let timer = get(&node, "getTimer", &format!("id={id}&app=it")).await;
        assert_eq!(timer["status"], if i < 3 { 1 } else { 2 }, "{timer}");
    }

    let pause = format!("{ui}#/apps?set.pause-app=it&set.pause-reason=maintenance&click=pause-submit");
    let dom = browse(&browser, &pause, "many-paused").await;
    let apps = section(&dom, "apps");
    assert!(apps.contains("it 5 2 paused until resumed: maintenance Resume"), "{apps}");
    let entry = app_entry(&node, "it").await;
    assert_eq!((entry["paused"].clone(), entry["pauseReason"].clone()), (json!(true), json!("maintenance")), "{entry}");

    let dom = browse(&browser, &format!("{ui}#/app/it?click=resume-it"), "many-resumed").await;
    assert!(element(&dom, "flash").contains("App it resumed"), "{}", element(&dom, "flash"));
    assert!(element(&dom, "app-state").contains("running"), "{}", element(&dom, "app-state"));
    assert_eq!(app_entry(&node, "it").await["paused"], false);
    node.stop().await;
}

/// Flow control (API 1g) in the console: an app's page lists its flows
/// with their limits and waiting and in-flight fires; a flow paused and
/// resumed with its button, limits set through the form (a blank field
/// kept, `none` removed) and a flow's limits removed after asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_an_apps_flows_and_pauses_limits_and_frees_one() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::spawn_with(test_config(&dir.path().join("flows.db"))).await;
    let rx = Receiver::start(false).await.unwrap();
    node.create_ok(json!({"app": "shop", "name": "charge", "cron": "0 0 9 * * *",
        "notifyHTTPParam": {"url": rx.url("/charge"), "flowKey": "payments-api"}}))
        .await;
    let reply: Value = node
        .http
        .post(format!("{}/api/xtimer/setFlowLimit", node.base))
        .json(&json!({"app": "shop", "key": "payments-api", "ratePerSec": 2.5, "parallelism": 3}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(reply["code"], 0, "{reply}");
    let flow = |key: &'static str| {
        let flows = get(&node, "getFlows", "app=shop");
        async move {
            let flows = flows.await;
            flows["list"].as_array().unwrap().iter().find(|f| f["key"] == key).cloned().unwrap_or(Value::Null)
        }
    };
    let page = format!("{}/ui#/app/shop", node.base);

    let dom = browse(&browser, &page, "flows").await;
    let flows = section(&dom, "flows");
    assert!(flows.contains("Flow Rate Parallelism Paused Waiting In flight"), "{flows}");
    assert!(flows.contains("payments-api 2.5/s 3 running 0 0 Pause Remove…"), "{flows}");

    let dom = browse(&browser, &format!("{page}?click=flow-pause-payments-api"), "flows-paused").await;
    assert!(element(&dom, "flash").contains("Flow payments-api paused"), "{}", element(&dom, "flash"));
    assert!(section(&dom, "flows").contains("payments-api 2.5/s 3 paused 0 0 Resume"), "{}", section(&dom, "flows"));
    let paused = flow("payments-api").await;
    assert_eq!(
        (&paused["paused"], &paused["ratePerSec"], &paused["parallelism"]),
        (&json!(true), &json!(2.5), &json!(3)),
        "paused, its limits kept: {paused}"
    );

    let dom = browse(&browser, &format!("{page}?click=flow-resume-payments-api"), "flows-resumed").await;
    assert!(element(&dom, "flash").contains("Flow payments-api resumed"), "{}", element(&dom, "flash"));
    assert_eq!(flow("payments-api").await["paused"], false);

    // The form: a blank rate is kept, `none` removes the parallelism; a
    // new flow's limits.
    let form = |key: &str, rate: &str, parallelism: &str| {
        format!(
            "{page}?set.flow-key={}&set.flow-rate={}&set.flow-parallelism={}&click=flow-submit",
            url_encode(key),
            url_encode(rate),
            url_encode(parallelism)
        )
    };
    browse(&browser, &form("payments-api", "", "none"), "flows-form").await;
    let limited = flow("payments-api").await;
    assert_eq!((&limited["ratePerSec"], &limited["parallelism"]), (&json!(2.5), &Value::Null), "{limited}");
    let dom = browse(&browser, &form("partner.example:443", "0.5", "2"), "flows-new").await;
    assert!(section(&dom, "flows").contains("partner.example:443 0.5/s 2 running"), "{}", section(&dom, "flows"));
    let partner = flow("partner.example:443").await;
    assert_eq!((&partner["ratePerSec"], &partner["parallelism"]), (&json!(0.5), &json!(2)), "{partner}");
    // A bad limit is refused in the page, nothing sent.
    let dom = browse(&browser, &form("partner.example:443", "fast", ""), "flows-bad").await;
    assert!(
        element(&dom, "flash").starts_with("Rate per second must be a number above 0"),
        "{}",
        element(&dom, "flash")
    );
    assert_eq!(flow("partner.example:443").await["ratePerSec"], 0.5);

    // Removing asks first.
    let remove = format!("{page}?click={}", url_encode("flow-del-partner.example:443"));
    let dom = browse(&browser, &remove, "flows-remove-ask").await;
    let ask = element(&dom, "flow-confirm");
    assert!(ask.starts_with("Remove the limits of flow partner.example:443 ? Its waiting fires (0)"), "{ask}");
    assert!(!flow("partner.example:443").await.is_null(), "nothing removed before the confirmation");
    browse(&browser, &format!("{remove},flow-del-confirm"), "flows-removed").await;
    assert!(flow("partner.example:443").await.is_null(), "the partner's limits are gone");
    assert!(!flow("payments-api").await.is_null(), "the other flow stays");
    node.stop().await;
}

/// The "New timer" form: every field, the page's own checks under their
/// fields, the server's refusals under theirs, and a timer created with
/// all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_creates_a_timer_and_shows_its_validation_messages() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::spawn_with(test_config(&dir.path().join("new.db"))).await;
    let rx = Receiver::start(false).await.unwrap();
    let ui = format!("{}/ui", node.base);
    let enc = |v: &str| url_encode(v);

    let dom = browse(&browser, &format!("{ui}#/new?app=it"), "new-empty").await;
    for field in [
        "name",
        "labels",
        "status",
        "cron",
        "runAt",
        "everyMs",
        "timezone",
        "notifyHTTPParam.url",
        "notifyHTTPParam.method",
        "notifyHTTPParam.header",
        "notifyHTTPParam.body",
        "notifyHTTPParam.template",
        "notifyAsyncflowParam.taskType",
        "retry.maxAttempts",
        "retry.backoffMs",
        "retry.noRetryStatuses",
        "misfire",
        "overlap",
        "callbackTimeoutMs",
        "pauseAfterFailures",
        "deleteAfterRun",
        "onFailure.url",
    ] {
        assert!(dom.contains(&format!("name=\"{field}\"")), "{field} in the form");
    }

    // The page's own checks: nothing is sent.
    let wrong = format!(
        "{ui}#/new?app=it&set.f-notifyHTTPParam-url={}&set.f-retry-maxAttempts=50&set.f-timezone={}&set.f-labels={}&click=create-submit",
        enc("ftp://x"),
        enc("Mars/Base"),
        enc("Team=a")
    );
    let dom = browse_sized(&browser, &wrong, "new-invalid", 1500).await;
    assert!(
        element(&dom, "creator-errors").starts_with("Not created: 6 problems"),
        "{}",
        element(&dom, "creator-errors")
    );
    for (field, message) in [
        ("name", "required"),
        ("cron", "give one of cron, once at or every"),
        ("timezone", "unknown time zone “Mars/Base”"),
        ("labels", "key “Team”: 1 to 63 of a-z 0-9 . _ / -"),
        ("notifyHTTPParam.url", "must be an http:// or https:// URL with a host"),
        ("retry.maxAttempts", "must be 1 to 20"),
    ] {
        let shown = field_error(&dom, "creator", field);
        assert!(shown.starts_with(message), "{field}: {shown:?}, not {message:?}");
    }
    assert!(app_entry(&node, "it").await.is_null(), "nothing was created");

    // The server's refusals, under their fields.
    let refused = format!(
        "{ui}#/new?app=it&set.f-name=x&set.f-cron={}&set.f-notifyHTTPParam-url={}&set.f-deleteAfterRun=true&click=create-submit",
        enc("61 * * * *"),
        enc(&rx.url("/hook"))
    );
    let dom = browse(&browser, &refused, "new-refused").await;
    assert!(element(&dom, "creator-errors").starts_with("The server refused it: 2 problems"), "{dom}");
    assert!(field_error(&dom, "creator", "cron").starts_with("cron `61 * * * *` is invalid"), "{dom}");
    assert!(field_error(&dom, "creator", "deleteAfterRun").contains("one-shot"), "{dom}");
    assert!(app_entry(&node, "it").await.is_null(), "nothing was created");

    let fill = [
        ("name", "made-in-console"),
        ("labels", "team=c, tier=gold"),
        ("cron", "0 0 9 * * *"),
        ("timezone", "Europe/Berlin"),
        ("endAt", "2031-01-01T00:00:00Z"),
        ("maxFires", "100"),
        ("spreadMs", "5000"),
        ("notifyHTTPParam-url", &rx.url("/hook")),
        ("notifyHTTPParam-method", "PUT"),
        ("notifyHTTPParam-header", "X-Token: t"),
        ("notifyHTTPParam-body", "{\"a\":1}"),
        ("retry-maxAttempts", "2"),
        ("retry-backoffMs", "500"),
        ("retry-noRetryStatuses", "none"),
        ("misfire", "skip"),
        ("overlap", "buffer_one"),
        ("callbackTimeoutMs", "2000"),
        ("pauseAfterFailures", "5"),
        ("onFailure-url", &rx.url("/failed")),
    ];
    let sets: String = fill.iter().map(|(k, v)| format!("set.f-{k}={}&", enc(v))).collect();
    let dom = browse(&browser, &format!("{ui}#/new?app=it&{sets}click=create-submit"), "new-created").await;
    let flash = element(&dom, "flash");
    assert!(flash.starts_with("Timer made-in-console created (#"), "{flash}");
    let id: i64 = flash.split('#').nth(1).unwrap().trim_end_matches(").").parse().unwrap();
    assert!(section(&dom, "definition").contains("Labels team=c tier=gold"), "{}", section(&dom, "definition"));
    let t = get(&node, "getTimer", &format!("id={id}&app=it")).await;
    assert_eq!(
        (&t["name"], &t["cron"], &t["timezone"], &t["status"], &t["labels"]),
        (
            &json!("made-in-console"),
            &json!("0 0 9 * * *"),
            &json!("Europe/Berlin"),
            &json!(2),
            &json!({"team": "c", "tier": "gold"})
        )
    );
    assert_eq!(
        (&t["endAt"], &t["maxFires"], &t["spreadMs"]),
        (&json!(1_924_992_000_000_i64), &json!(100), &json!(5000))
    );
    let h = &t["notifyHTTPParam"];
    assert_eq!(
        (&h["method"], &h["header"], &h["body"]),
        (&json!("PUT"), &json!({"X-Token": "t"}), &json!("{\"a\":1}"))
    );
    assert_eq!(t["retry"], json!({"maxAttempts": 2, "backoffMs": 500, "noRetryStatuses": []}));
    assert_eq!(
        (&t["misfire"], &t["overlap"], &t["callbackTimeoutMs"]),
        (&json!("skip"), &json!("buffer_one"), &json!(2000))
    );
    assert_eq!((&t["pauseAfterFailures"], &t["onFailure"]["url"]), (&json!(5), &json!(rx.url("/failed"))));

    // Edit: what changed is saved; a field updateTimer cannot remove is
    // refused under it.
    let edit = format!(
        "{ui}#/timer/it/{id}?set.e-labels={}&set.e-cron={}&click=edit,save-submit",
        enc("team=d"),
        enc("0 30 8 * * *")
    );
    let dom = browse(&browser, &edit, "new-edited").await;
    assert_eq!(element(&dom, "flash"), "Saved.");
    let t = get(&node, "getTimer", &format!("id={id}&app=it")).await;
    assert_eq!(
        (&t["cron"], &t["labels"], &t["timezone"]),
        (&json!("0 30 8 * * *"), &json!({"team": "d"}), &json!("Europe/Berlin"))
    );
    let dom = browse(
        &browser,
        &format!("{ui}#/timer/it/{id}?set.e-callbackTimeoutMs=&click=edit,save-submit"),
        "new-edit-refused",
    )
    .await;
    assert_eq!(field_error(&dom, "editor", "callbackTimeoutMs"), "cannot be removed once set: give another value");
    assert_eq!(get(&node, "getTimer", &format!("id={id}&app=it")).await["callbackTimeoutMs"], 2000);
    node.stop().await;
}

/// A timer's page: its next fire in its own zone, a backfill through the
/// page's form (the fires made on the server), replay of failed fires (its
/// count, or the server's message while it has no such call), and the
/// change history (or a note that the server keeps none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timers_page_backfills_replays_and_shows_its_history() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::spawn_with(test_config(&dir.path().join("timer.db"))).await;
    let rx = Receiver::start(false).await.unwrap();
    let id = node
        .create_ok(json!({"app": "it", "name": "every-minute", "cron": "0 * * * * *", "timezone": "Asia/Kolkata",
            "status": 2, "labels": {"team": "a"}, "notifyHTTPParam": {"url": rx.url("/hook")}}))
        .await;
    // Ten scheduled minutes before the timer existed: none has a fire record.
    let to = now_ms() / 60_000 * 60_000;
    let from = to - 10 * 60_000;
    let url = format!(
        "{}/ui#/timer/it/{id}?set.backfill-from={}&set.backfill-to={}&set.replay-from={}&set.replay-to={}&click=backfill-submit,replay-submit",
        node.base, utc(from), utc(to), utc(from), utc(to)
    );
    let dom = browse_sized(&browser, &url, "timer-actions", 1500).await;
    let dom_actions = dom.clone();
    // The next fire in UTC, then in the timer's zone (+05:30).
    let next = element(&dom, "next-fire");
    let (shown_utc, shown_local) = next.split_once(' ').unwrap();
    let at = chrono::DateTime::parse_from_rfc3339(shown_utc).unwrap_or_else(|_| panic!("{next}"));
    let local = (at + chrono::Duration::minutes(5 * 60 + 30)).format("%Y-%m-%d %H:%M:%S");
    assert_eq!(shown_local, format!("{local} +05:30 Asia/Kolkata"), "{next}");

    assert_eq!(element(&dom, "backfill-result"), "Backfilled: 10 fires made, sent oldest first.");
    let fires = section(&dom, "fires");
    assert!(!fires.contains("No fire yet"), "the fires are shown again after the backfill: {fires}");
    let made = wait_for("the backfilled fires", || async {
        let fires = node.fires(id, "it").await;
        let made: Vec<i64> =
            fires.iter().map(|f| f["scheduledTimer"].as_i64().unwrap()).filter(|ms| (from..to).contains(ms)).collect();
        (made.len() == 10).then_some(made)
    })
    .await;
    assert_eq!(made, (0..10).map(|m| from + m * 60_000).collect::<Vec<_>>());

    // Run now, then disable, with the page's buttons.
    let dom =
        browse(&browser, &format!("{}/ui#/timer/it/{id}?click=run-now,disable", node.base), "timer-run-disable").await;
    assert!(dom.contains("id=\"enable\""), "the page offers to enable it again");
    assert_eq!(get(&node, "getTimer", &format!("id={id}&app=it")).await["status"], 1);
    assert!(node.fires(id, "it").await.iter().any(|f| f["manual"] == true), "a manual fire was made");

    let replay = element(&dom_actions, "replay-result");
    assert!(
        replay.starts_with("Replayed: ") || replay.starts_with("Replay failed: "),
        "the count or the server's message: {replay}"
    );
    match section(&dom, "change-history") {
        history if history.is_empty() => {
            let missing = element(&dom, "history-missing");
            assert!(missing.starts_with("History not available ("), "{missing}");
        }
        history => assert!(history.contains("create"), "{history}"),
    }

    // The timer's figures, and why a time between two minutes had no fire.
    let between = to - 30_000;
    let url = format!("{}/ui#/timer/it/{id}?set.explain-at={between}&click=explain-submit", node.base);
    let dom = browse_sized(&browser, &url, "timer-explain", 1500).await;
    let stats = element(&dom, "stats");
    assert!(stats == "no fire" || stats.contains(" succeeded, "), "the last 24 hours' figures: {stats}");
    let verdict = element(&dom, "explain-verdict");
    assert!(verdict.starts_with("not a scheduled time:"), "{verdict}");
    assert!(section(&dom, "explain-timeline").contains("scheduled"), "{}", section(&dom, "explain-timeline"));
    node.stop().await;
}

/// asyncflow in the console: the task types, a type's tasks by status,
/// and one task's detail (context, schedule log, retries).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_task_types_tasks_by_status_and_one_task() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::spawn_with(test_config(&dir.path().join("tasks.db"))).await;
    v1(&node, "register_task", Some(json!({"task_type": "ui_demo"}))).await;
    let mut ids = Vec::new();
    for user in ["alice", "bob"] {
        let task = json!({"task_data": {"task_type": "ui_demo", "user_id": user, "task_stage": "charge",
            "context": format!("{{\"order\":\"{user}-42\"}}")}});
        ids.push(v1(&node, "create_task", Some(task)).await["task_id"].as_str().unwrap().to_owned());
    }
    // A worker holds one and reports it failed, retries spent, with its log.
    let held = v1(&node, "hold_tasks?task_type=ui_demo&limit=1", Some(json!({}))).await;
    let held_id = held["task_list"][0]["task_id"].as_str().unwrap().to_owned();
    let pending_id = ids.iter().find(|id| **id != held_id).unwrap().clone();
    let log = json!({
        "LastData": {"TraceId": "trace-2", "ErrMsg": "card declined", "Cost": "12ms", "Stage": "charge",
            "Outcome": "fatal", "StartTime": "2026-11-27T11:50:00Z", "EndTime": "2026-11-27T11:50:00.012Z"},
        "HistoryDatas": [{"TraceId": "trace-1", "ErrMsg": "timeout", "Cost": "3s", "Stage": "charge",
            "Outcome": "retry", "StartTime": "2026-11-27T11:49:00Z", "EndTime": "2026-11-27T11:49:03Z"}]
    });
    let set = json!({"task_data": {"task_id": held_id, "status": 4, "crt_retry_num": 3,
        "schedule_log": log.to_string()}});
    v1(&node, "set_task", Some(set)).await;
    let ui = format!("{}/ui", node.base);

    let dom = browse(&browser, &format!("{ui}#/tasks"), "tasks-types").await;
    assert!(section(&dom, "task-types").contains("ui_demo 2"), "{}", section(&dom, "task-types"));
    let dom = browse(&browser, &format!("{ui}#/tasks/ui_demo?status=1"), "tasks-pending").await;
    let tasks = section(&dom, "tasks");
    assert!(tasks.contains(&pending_id) && tasks.contains("charge pending 0 of 3"), "{tasks}");
    assert!(!tasks.contains(&held_id), "{tasks}");
    let dom = browse(&browser, &format!("{ui}#/tasks/ui_demo?status=4"), "tasks-failed").await;
    let tasks = section(&dom, "tasks");
    assert!(tasks.contains(&held_id) && tasks.contains("failed 3 of 3") && !tasks.contains(&pending_id), "{tasks}");

    let dom = browse(&browser, &format!("{ui}#/task/{held_id}"), "tasks-detail").await;
    let task = section(&dom, "task");
    assert!(task.contains("Type ui_demo Stage charge") && task.contains("Status failed"), "{task}");
    assert!(task.contains("Retries 3 of 3 used"), "{task}");
    let context = element(&dom, "task-context");
    assert!(context.contains("\"order\": \"") && context.contains("-42\""), "pretty context: {context}");
    let log = section(&dom, "schedule-log");
    assert!(
        log.contains("last charge fatal 2026-11-27T11:50:00Z 2026-11-27T11:50:00.012Z 12ms card declined trace-2"),
        "{log}"
    );
    assert!(log.contains("2 charge retry 2026-11-27T11:49:00Z 2026-11-27T11:49:03Z 3s timeout trace-1"), "{log}");
    node.stop().await;
}

/// `POST /api/xtimer/{route}`'s result, asserting success.
async fn post(node: &TestNode, route: &str, body: Value) -> Value {
    let url = format!("{}/api/xtimer/{route}", node.base);
    let reply: Value = node.http.post(url).json(&body).send().await.unwrap().json().await.unwrap();
    assert_eq!(reply["code"], 0, "{route}: {reply}");
    reply["result"].clone()
}

/// What `measure=ID` recorded for the element `id`: `[top, left, width,
/// height]` in CSS pixels.
fn measured(dom: &str, id: &str) -> Vec<i64> {
    let raw = dom.split("data-measured=\"").nth(1).unwrap_or_else(|| panic!("nothing measured: {dom}"));
    let json = raw[..raw.find('"').unwrap()].replace("&quot;", "\"");
    let boxes: Value = serde_json::from_str(&json).unwrap();
    let text = boxes[id].as_str().unwrap_or_else(|| panic!("{id} not measured: {boxes}"));
    text.split(',').map(|n| n.parse().unwrap()).collect()
}

/// Every display tells the truth (issue 52): a disabled timer's next
/// times say they will not go out; the history shows a backfill's window
/// as times; counts agree with their nouns ("1 fire"); the Apps table's
/// Paused column says whether and until when; a refused selector is said
/// once, without moving the form; the lateness chart's labels are whole;
/// the App field's example reads as an example.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_tells_the_truth() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let node = TestNode::spawn_with(test_config(&dir.path().join("truth.db"))).await;
    let rx = Receiver::start(false).await.unwrap();
    let hook = json!({"url": rx.url("/hook")});
    let off = node
        .create_ok(json!({"app": "truth", "name": "off", "cron": "0 0 9 * * *", "labels": {"team": "a"},
            "notifyHTTPParam": hook}))
        .await;
    let five = node
        .create_ok(json!({"app": "truth", "name": "five", "cron": "0 */5 * * * *", "status": 2,
            "labels": {"team": "a"}, "notifyHTTPParam": hook}))
        .await;
    node.create_ok(json!({"app": "held", "name": "h", "cron": "0 0 9 * * *", "notifyHTTPParam": hook})).await;
    let paused = post(&node, "pauseApp", json!({"app": "held", "until": "2h", "reason": "deploy"})).await;
    let until = paused["pausedUntil"].as_i64().unwrap();
    let to = now_ms() / 60_000 * 60_000 - 60_000;
    let from = to - 15 * 60_000;
    post(&node, "backfillTimer", json!({"id": five, "app": "truth", "from": from, "to": to})).await;
    let ui = format!("{}/ui", node.base);

    // Apps: paused or not, and until when.
    let dom = browse(&browser, &ui, "truth-apps").await;
    let apps = section(&dom, "apps");
    assert!(apps.contains("truth 2 1 no"), "{apps}");
    let shown = format!("held 1 0 paused until {}: deploy", utc(until / 1000 * 1000));
    assert!(apps.contains(&shown), "{shown:?} in {apps}");
    assert!(!apps.contains("running"), "{apps}");

    // A disabled timer: no next fire, and its schedule's times flagged.
    let dom = browse(&browser, &format!("{ui}#/timer/truth/{off}"), "truth-disabled").await;
    assert_eq!(element(&dom, "next-fire"), "none while disabled");
    let flagged = element(&dom, "next-disabled");
    assert!(flagged.starts_with("The timer is disabled: these times will not go out"), "{flagged}");
    assert!(section(&dom, "next-fires").matches("+00:00").count() >= 5, "{}", section(&dom, "next-fires"));

    // The backfill's window as times; the fires counted in words.
    let dom = browse_sized(&browser, &format!("{ui}#/timer/truth/{five}"), "truth-history", 1500).await;
    let history = section(&dom, "change-history");
    let window = format!("window : – → {} to {}", utc(from), utc(to));
    assert!(history.contains(&window), "{window:?} in {history}");
    assert!(!history.contains(&from.to_string()), "no raw Unix ms: {history}");
    assert!(element(&dom, "next-disabled").is_empty(), "an enabled timer's times are not flagged");

    // The forecast: one fire in its peak second, not "1 fires".
    let dom = browse_sized(&browser, &format!("{ui}#/app/truth"), "truth-forecast", 1500).await;
    let forecast = section(&dom, "forecast-summary");
    assert!(forecast.contains("Peak 1 fire in one second"), "{forecast}");
    assert!(forecast.contains("fires in 10 minutes"), "{forecast}");
    assert!(!dom.contains(" 1 fires"), "{forecast}");

    // A refused selector: said once, under its field, and the form stays put.
    let good = browse(&browser, &format!("{ui}#/app/truth?selector=team%3Da&measure=selector,bulk"), "truth-sel").await;
    let bad_url = format!("{ui}#/app/truth?selector=team%20in%20(a&measure=selector,bulk");
    let bad = browse(&browser, &bad_url, "truth-bad-selector").await;
    assert!(
        element(&bad, "selector-error").starts_with("selector: at character"),
        "{}",
        element(&bad, "selector-error")
    );
    assert_eq!(text(&bad).matches("selector: at character").count(), 1, "said once: {}", text(&bad));
    assert_eq!(measured(&bad, "selector"), measured(&good, "selector"), "the field does not move");
    assert_eq!(measured(&bad, "bulk")[0], measured(&good, "bulk")[0], "nor what follows the form");

    // The App field's example is a placeholder, styled as one.
    let dom = browse(&browser, &format!("{ui}#/new"), "truth-new").await;
    assert!(dom.contains("placeholder=\"e.g. billing\""), "{dom}");
    let css = node.http.get(format!("{ui}/app.css")).send().await.unwrap().text().await.unwrap();
    assert!(css.contains("::placeholder {"), "placeholders are styled as examples");

    // The lateness chart with a p99 over 100 s: every y label is whole,
    // inside the chart (its box starts at x >= 0).
    let index = node.http.get(&ui).send().await.unwrap().text().await.unwrap();
    let probe = index.replace("\"/ui/", &format!("\"{ui}/")).replace(
        "</body>",
        "<div id=\"probe\"></div><script>addEventListener(\"load\", () => { const now = Date.now();
          const box = document.getElementById(\"probe\");
          box.innerHTML = `<div class=\"chart\">${chart({ fromMs: now - 3600000, sampled: false, paced: 0,
            minutes: [{ minuteMs: now - 600000, p50Ms: 40000, p99Ms: 123456, fires: 1 }] })}</div>`;
          const xs = [...box.querySelectorAll(\".ytick\")].map((t) => t.getBBox().x);
          box.dataset.ticks = xs.length; box.dataset.minx = Math.min(...xs); });</script></body>",
    );
    let page = dir.path().join("probe.html");
    std::fs::write(&page, probe).unwrap();
    let dom = browse(&browser, &format!("file://{}", page.display()), "truth-axis").await;
    let attr = |name: &str| -> f64 {
        let raw = dom.split(&format!("data-{name}=\"")).nth(1).unwrap_or_else(|| panic!("no {name}: {dom}"));
        raw[..raw.find('"').unwrap()].parse().unwrap()
    };
    assert_eq!(attr("ticks"), 5.0);
    assert!(attr("minx") >= 0.0, "a y label starts left of the chart, clipped: x = {}", attr("minx"));
    assert!(dom.contains("200,000 ms"), "the top label: {dom}");
    node.stop().await;
}

/// Percent-encodes `text` for a URL's query.
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
