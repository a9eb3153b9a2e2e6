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

/// The text of the element with `id` (its tags stripped), or empty.
fn section(dom: &str, id: &str) -> String {
    let Some(start) = dom.find(&format!("id=\"{id}\"")) else { return String::new() };
    let rest = &dom[start..];
    let end = rest.find("</table>").unwrap_or(rest.len());
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
