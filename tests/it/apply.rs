//! Timers as code (API 1f `applyTimers`, `xtimer apply` and `xtimer
//! export`), through the binary against a live node: a folder of timers
//! created, applied again unchanged, one changed, some pruned, a dry run,
//! `export | apply`, refusals that change nothing, and the history.
//!
//! The check is a folder of 500 timers; these tests apply
//! [`TIMERS`] (150) so that the three stacks stay quick; nothing in the
//! path depends on the count.

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{json, Value};
use xtimer::cli::client::exit;
use xtimer_core::config::{AppCredentials, Secret};

use crate::helpers::{Stack, Storage, TestNode};

/// Timers in the applied folder.
const TIMERS: usize = 150;
/// Timers per file.
const PER_FILE: usize = 10;
/// The app they belong to.
const APP: &str = "gitops";

/// Runs `xtimer ARGS --server BASE` to its end, with `stdin` as its input.
async fn xtimer(base: &str, args: &[&str], stdin: Option<String>) -> Output {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend(["--server".into(), base.into()]);
    tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_xtimer"))
            .args(&all)
            .env_remove("XTIMER_TOKEN")
            .env_remove("XTIMER_SERVER")
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("xtimer runs");
        if let Some(text) = stdin {
            child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        }
        child.wait_with_output().expect("xtimer ends")
    })
    .await
    .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn code(out: &Output) -> u8 {
    out.status.code().expect("exited") as u8
}

/// The `apply` run's summary line (its last).
fn summary(out: &Output) -> String {
    stdout(out).lines().last().unwrap_or_default().to_owned()
}

/// The names on the lines of `apply`'s output that start with `word`.
fn named(out: &Output, word: &str) -> Vec<String> {
    stdout(out)
        .lines()
        .filter_map(|l| l.strip_prefix(word))
        .filter_map(|rest| rest.trim_start().strip_prefix(&format!("{APP}/")))
        .map(str::to_owned)
        .collect()
}

/// Timer `i` of the folder: of several kinds, so that each kind is shown
/// to read back unchanged.
fn timer(i: usize, url: &str) -> Value {
    let name = format!("t-{i:03}");
    let mut t = match i % 5 {
        0 => json!({"name": name, "cron": "0 0 0 1 1 ?", "status": 2}),
        1 => json!({"name": name, "cron": "0 30 2 * * ?", "timezone": "Asia/Shanghai",
                    "labels": {"team": "billing"}, "retry": {"maxAttempts": 5, "backoffMs": 200}}),
        // An interval with no anchor: the stored one is kept.
        2 => json!({"name": name, "everyMs": 3_600_000, "status": 2, "misfire": "skip",
                    "excludeCalendars": ["holidays"]}),
        3 => json!({"name": name, "runAt": "2099-01-01T00:00:00Z", "deleteAfterRun": true}),
        _ => json!({"name": name, "cron": "*/5 * * * *", "overlap": "skip", "spreadMs": 1000,
                    "startAt": "2030-01-01T00:00:00Z", "endAt": "2040-01-01T00:00:00+08:00", "maxFires": 3,
                    "callbackTimeoutMs": 1500, "misfireThresholdMs": 5000, "pauseAfterFailures": 3,
                    "onFailure": {"url": url, "header": {"X-Failed": "1"}},
                    "retry": {"maxAttempts": 2, "backoffMs": 0, "noRetryStatuses": [500, 404, 500]}}),
    };
    t["app"] = json!(APP);
    t["notifyHTTPParam"] = json!({"url": url, "method": "put", "header": {"X-Team": "b"}, "body": "{\"n\":1}"});
    if i % 5 == 3 {
        t["notifyHTTPParam"]["template"] = json!(true);
        t["notifyHTTPParam"]["body"] = json!("{\"at\":\"{{runTime}}\"}");
    }
    t
}

/// Writes the folder: files of [`PER_FILE`] timers, YAML lists and JSON
/// `{"timers": [...]}` in turn; `skip` timers left out.
fn write_folder(dir: &Path, url: &str, skip: impl Fn(usize) -> bool, edit: impl Fn(usize, &mut Value)) {
    for entry in std::fs::read_dir(dir).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    for (f, first) in (0..TIMERS).step_by(PER_FILE).enumerate() {
        let timers: Vec<Value> = (first..first + PER_FILE)
            .filter(|i| !skip(*i))
            .map(|i| {
                let mut t = timer(i, url);
                edit(i, &mut t);
                t
            })
            .collect();
        if f % 2 == 0 {
            let text = serde_yaml_ng::to_string(&timers).unwrap();
            std::fs::write(dir.join(format!("{f:02}-timers.yaml")), text).unwrap();
        } else {
            let text = serde_json::to_string_pretty(&json!({ "timers": timers })).unwrap();
            std::fs::write(dir.join(format!("{f:02}-timers.json")), text).unwrap();
        }
    }
}

async fn total(node: &TestNode, query: &str) -> i64 {
    let reply = node.get(&format!("getAppTimers?app={APP}&pageSize=1{query}")).await;
    reply["result"]["total"].as_i64().unwrap_or_else(|| panic!("{reply}"))
}

async fn id_of(node: &TestNode, name: &str) -> i64 {
    let reply = node.get(&format!("getAppTimers?app={APP}&q={name}&pageSize=10")).await;
    let list = reply["result"]["list"].as_array().unwrap_or_else(|| panic!("{reply}"));
    let t = list.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} in {reply}"));
    t["id"].as_i64().unwrap()
}

/// The actions of a timer's history, newest first, each with who.
async fn history(node: &TestNode, id: i64, app: &str) -> Vec<(String, String, Value)> {
    let reply = node.get(&format!("getTimerHistory?id={id}&app={app}")).await;
    let list = reply["result"]["list"].as_array().unwrap_or_else(|| panic!("{reply}"));
    list.iter()
        .map(|e| (e["action"].as_str().unwrap().to_owned(), e["by"].as_str().unwrap().to_owned(), e["changes"].clone()))
        .collect()
}

/// The check, with [`TIMERS`] timers: a folder applied creates
/// them; again, all unchanged; one changed, one updated; ten removed and
/// `--prune`, exactly those ten deleted (a dry run first changes nothing,
/// a timer without the label is kept); `export | apply` all unchanged;
/// each change in the history as `apply`.
pub async fn a_folder_applied_creates_then_changes_only_what_changed(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let base = node.base.clone();
    let url = "http://127.0.0.1:9/hook";
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("timers");
    std::fs::create_dir(&folder).unwrap();
    let folder_arg = folder.to_str().unwrap().to_owned();
    let calendar = node.post("putCalendar", json!({"app": APP, "name": "holidays", "dates": ["2030-12-25"]})).await;
    assert_eq!(calendar["code"], 0, "{calendar}");
    // Made by hand, not by apply: no managed-by label, never pruned.
    let by_hand = node
        .create_ok(json!({"app": APP, "name": "by-hand", "cron": "0 0 0 1 1 ?", "notifyHTTPParam": {"url": url}}))
        .await;

    write_folder(&folder, url, |_| false, |_, _| {});
    let out = xtimer(&base, &["apply", "-f", &folder_arg], None).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    assert_eq!(summary(&out), format!("{TIMERS} created, 0 updated, 0 unchanged, 0 deleted"));
    let created = named(&out, "created");
    assert_eq!(created.len(), TIMERS);
    assert_eq!(created[0], "t-000", "in file order");
    assert_eq!(total(&node, "").await, TIMERS as i64 + 1);
    assert_eq!(total(&node, "&selector=managed-by%3Dapply").await, TIMERS as i64);
    let t0 = node.get(&format!("getTimer?id={}&app={APP}", id_of(&node, "t-001").await)).await;
    assert_eq!(t0["result"]["labels"], json!({"team": "billing", "managed-by": "apply"}), "{t0}");

    let out = xtimer(&base, &["apply", "-f", &folder_arg], None).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    assert_eq!(summary(&out), format!("0 created, 0 updated, {TIMERS} unchanged, 0 deleted"), "{}", stdout(&out));

    write_folder(
        &folder,
        url,
        |_| false,
        |i, t| {
            if i == 3 {
                t["cron"] = json!("0 15 3 * * ?");
                t.as_object_mut().unwrap().remove("runAt");
                t.as_object_mut().unwrap().remove("deleteAfterRun");
            }
        },
    );
    let out = xtimer(&base, &["apply", "-f", &folder_arg], None).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    assert_eq!(summary(&out), format!("0 created, 1 updated, {} unchanged, 0 deleted", TIMERS - 1));
    assert_eq!(named(&out, "updated"), ["t-003"]);
    let id3 = id_of(&node, "t-003").await;
    let h = history(&node, id3, APP).await;
    let actions: Vec<(&str, &str)> = h.iter().map(|(a, b, _)| (a.as_str(), b.as_str())).collect();
    assert_eq!(actions, [("apply", "anonymous"), ("apply", "anonymous")], "updated, then created: {h:?}");
    assert_eq!(h[0].2["cron"], json!([null, "0 15 3 * * ?"]), "{h:?}");

    // Ten timers gone from the files: a dry run says so and changes nothing.
    let removed = |i: usize| (40..50).contains(&i);
    write_folder(&folder, url, removed, |i, t| {
        if i == 3 {
            t["cron"] = json!("0 15 3 * * ?");
            t.as_object_mut().unwrap().remove("runAt");
            t.as_object_mut().unwrap().remove("deleteAfterRun");
        }
    });
    let out = xtimer(&base, &["apply", "-f", &folder_arg, "--prune", "--dry-run"], None).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    assert_eq!(
        summary(&out),
        format!("0 created, 0 updated, {} unchanged, 10 deleted (dry run: nothing changed)", TIMERS - 10)
    );
    assert_eq!(total(&node, "").await, TIMERS as i64 + 1, "a dry run deletes nothing");
    let out = xtimer(&base, &["apply", "-f", &folder_arg], None).await;
    assert_eq!(summary(&out), format!("0 created, 0 updated, {} unchanged, 0 deleted", TIMERS - 10), "no prune");
    let id40 = id_of(&node, "t-040").await;
    let out = xtimer(&base, &["apply", "-f", &folder_arg, "--prune"], None).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let expected: Vec<String> = (40..50).map(|i| format!("t-{i:03}")).collect();
    assert_eq!(named(&out, "deleted"), expected);
    assert_eq!(total(&node, "").await, TIMERS as i64 - 10 + 1, "the timer made by hand is kept");
    assert_eq!(node.act("getTimer", by_hand, APP).await["code"], 0);
    let h = history(&node, id40, APP).await;
    assert_eq!((h[0].0.as_str(), &h[0].2), ("apply", &json!({"status": [2, 3]})), "{h:?}");

    // export | apply: all unchanged, as YAML and as JSON.
    let out = xtimer(&base, &["export", "--app", APP, "--selector", "managed-by=apply"], None).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let yaml = stdout(&out);
    assert!(yaml.starts_with("- app: gitops\n  name: t-000\n  status: 2\n"), "{yaml}");
    assert!(!yaml.contains("id:") && !yaml.contains("nextRun"), "the create input, not the view: {yaml}");
    let out = xtimer(&base, &["apply", "-f", "-", "--prune"], Some(yaml)).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    assert_eq!(summary(&out), format!("0 created, 0 updated, {} unchanged, 0 deleted", TIMERS - 10));
    let out = xtimer(&base, &["export", "--app", APP, "--json"], None).await;
    let exported: Value = serde_json::from_str(&stdout(&out)).expect("--json prints JSON");
    assert_eq!(exported.as_array().unwrap().len(), TIMERS - 10 + 1);
    let file = dir.path().join("all.json");
    std::fs::write(&file, exported.to_string()).unwrap();
    let out = xtimer(&base, &["apply", "-f", file.to_str().unwrap(), "--dry-run"], None).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    assert_eq!(named(&out, "updated"), ["by-hand"], "a timer made by hand is adopted: it gains the label");
    assert_eq!(named(&out, "unchanged").len(), TIMERS - 10);
    node.stop().await;
}

/// Refusals change nothing: two timers of one name (a 400 naming both,
/// and the CLI naming their files), a timer of another app, a bad item
/// among good ones; a one-shot in the past is refused unless stored so.
pub async fn a_refused_apply_changes_nothing(stack: Stack) {
    let node = TestNode::spawn(stack).await;
    let url = "http://127.0.0.1:9/hook";
    let t = |name: &str| json!({"app": APP, "name": name, "cron": "0 0 0 1 1 ?", "notifyHTTPParam": {"url": url}});
    let apply = |timers: Vec<Value>| {
        let node = &node;
        async move { node.post("applyTimers", json!({"app": APP, "timers": timers})).await }
    };
    let reply = apply(vec![t("a"), t("dup"), t("b"), t("dup")]).await;
    assert_eq!(reply["code"], 400, "{reply}");
    assert_eq!(
        reply["msg"], "timers: timers[1] and timers[3] are both named `dup`: a name is unique in an app",
        "{reply}"
    );
    let mut other = t("c");
    other["app"] = json!("elsewhere");
    let reply = apply(vec![t("a"), other]).await;
    assert_eq!(reply["code"], 400, "{reply}");
    assert_eq!(reply["msg"], "timers[1].app: must be `gitops`, the app applied to, got `elsewhere`");
    let mut bad = t("c");
    bad["cron"] = json!("61 * * * *");
    let reply = apply(vec![t("a"), t("b"), bad]).await;
    assert_eq!(reply["code"], 400, "{reply}");
    assert!(reply["msg"].as_str().unwrap().starts_with("timers[2].cron"), "{reply}");
    let reply = node.post("applyTimers", json!({"app": APP, "timers": [t("a")], "owner": "a b"})).await;
    assert_eq!(reply["code"], 400, "{reply}");
    assert!(reply["msg"].as_str().unwrap().starts_with("owner: ' ' cannot be in it"), "{reply}");
    let mut past = t("once");
    past.as_object_mut().unwrap().remove("cron");
    past["runAt"] = json!("2020-01-01T00:00:00Z");
    let reply = apply(vec![t("a"), past]).await;
    assert_eq!(reply["code"], 400, "{reply}");
    assert!(reply["msg"].as_str().unwrap().starts_with("timers[1].runAt: 2020-01-01T00:00:00.000Z is in the past"));
    assert_eq!(total(&node, "").await, 0, "nothing was created");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), serde_yaml_ng::to_string(&vec![t("x"), t("dup")]).unwrap()).unwrap();
    std::fs::write(dir.path().join("b.json"), json!([t("dup")]).to_string()).unwrap();
    let out = xtimer(&node.base, &["apply", "-f", dir.path().to_str().unwrap()], None).await;
    assert_eq!(code(&out), exit::INVALID, "{}", stdout(&out));
    let a = dir.path().join("a.yaml");
    let b = dir.path().join("b.json");
    assert_eq!(
        stderr(&out).trim(),
        format!(
            "error: app `gitops`: timers: timers[1] ({}: item 1) and timers[2] ({}: item 0) are both named `dup`: \
             a name is unique in an app (HTTP 400)",
            a.display(),
            b.display()
        )
    );
    assert_eq!(total(&node, "").await, 0, "nothing was created");

    // Applied, then the list with a one-shot whose time is past is refused
    // whole: the good changes beside it are not made.
    let reply = apply(vec![t("a"), t("b")]).await;
    assert_eq!(reply["result"]["created"], json!(["a", "b"]), "{reply}");
    let mut changed = t("a");
    changed["cron"] = json!("0 0 0 2 1 ?");
    let mut past = t("once");
    past.as_object_mut().unwrap().remove("cron");
    past["runAt"] = json!("2020-01-01T00:00:00Z");
    let reply = node.post("applyTimers", json!({"app": APP, "timers": [changed, past], "prune": true})).await;
    assert_eq!(reply["code"], 400, "{reply}");
    let a = node.get(&format!("getTimer?id={}&app={APP}", id_of(&node, "a").await)).await;
    assert_eq!(a["result"]["cron"], "0 0 0 1 1 ?", "not changed: {a}");
    assert_eq!(total(&node, "").await, 2, "not pruned");
    node.stop().await;
}

/// A change the store refuses midway (the app's fires per minute) undoes
/// what the apply did before it: the timer changed first gets its old
/// definition back, the new one is deleted again.
pub async fn a_change_refused_midway_is_undone(stack: Stack) {
    let storage = Storage::new(stack).await;
    let mut config = storage.config.clone();
    config.limits.fires_per_minute_per_app = 100;
    let node = TestNode::spawn_with(config).await;
    let t = |name: &str, cron: &str| {
        json!({"app": APP, "name": name, "cron": cron, "status": 2,
               "notifyHTTPParam": {"url": "http://127.0.0.1:9/hook"}, "retry": {"maxAttempts": 1}})
    };
    let reply =
        node.post("applyTimers", json!({"app": APP, "timers": [t("a", "0 0 0 1 1 ?"), t("b", "0 0 0 1 1 ?")]})).await;
    assert_eq!(reply["result"]["created"], json!(["a", "b"]), "{reply}");
    let (a, b) = (id_of(&node, "a").await, id_of(&node, "b").await);

    // Each alone fits (60 a minute); both, 120, do not: `b` is refused.
    let every_second = "* * * * * *";
    let list = [t("new", "0 0 0 1 1 ?"), t("a", every_second), t("b", every_second)];
    let reply = node.post("applyTimers", json!({"app": APP, "timers": list})).await;
    assert_eq!(reply["code"], 400, "{reply}");
    let msg = reply["msg"].as_str().unwrap();
    assert!(msg.starts_with("timers[2].cron: this timer with the app's enabled timers would fire"), "{reply}");
    let a_now = node.get(&format!("getTimer?id={a}&app={APP}")).await;
    assert_eq!(a_now["result"]["cron"], "0 0 0 1 1 ?", "`a` has its old definition back: {a_now}");
    assert_eq!(a_now["result"]["status"], 2);
    assert_eq!(node.get(&format!("getTimer?id={b}&app={APP}")).await["result"]["cron"], "0 0 0 1 1 ?");
    assert_eq!(total(&node, "").await, 2, "`new` is deleted again");
    let h = history(&node, a, APP).await;
    let actions: Vec<&str> = h.iter().map(|(a, _, _)| a.as_str()).collect();
    assert_eq!(actions, ["apply", "apply", "apply"], "created, changed, changed back: {h:?}");
    assert_eq!(h[0].2["cron"], json!([every_second, "0 0 0 1 1 ?"]), "{h:?}");
    // The apply that fits goes through.
    let list = [t("a", every_second), t("b", "0 0 0 1 1 ?")];
    let reply = node.post("applyTimers", json!({"app": APP, "timers": list})).await;
    assert_eq!(reply["result"]["updated"], json!(["a"]), "{reply}");
    assert_eq!(reply["result"]["unchanged"], json!(["b"]), "{reply}");
    node.stop().await;
}

crate::on_both_stacks!(
    a_folder_applied_creates_then_changes_only_what_changed,
    a_refused_apply_changes_nothing,
    a_change_refused_midway_is_undone,
);

/// A one-shot applied, fired and completed still reads back unchanged
/// from its file and from `export` (its `runAt` now past, its status 4
/// what became of 2), while a changed one with a past `runAt` is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_one_shot_reads_back_unchanged() {
    let node = TestNode::spawn(Stack::Embedded).await;
    let run_at_ms = crate::helpers::now_ms() + 1_500;
    let run_at = xtimer_core::clock::rfc3339(run_at_ms);
    let once = json!({"app": APP, "name": "once", "runAt": run_at, "status": 2,
                      "notifyHTTPParam": {"url": "http://127.0.0.1:9/once"}, "retry": {"maxAttempts": 1}});
    let apply = |timers: Value| {
        let node = &node;
        async move { node.post("applyTimers", json!({"app": APP, "timers": timers})).await }
    };
    assert_eq!(apply(json!([once])).await["result"]["created"], json!(["once"]));
    let id = id_of(&node, "once").await;
    crate::helpers::wait_for("the one-shot completed", || async {
        let t = node.get(&format!("getTimer?id={id}&app={APP}")).await;
        (t["result"]["status"] == 4).then_some(())
    })
    .await;
    let reply = apply(json!([once])).await;
    assert_eq!(reply["result"]["unchanged"], json!(["once"]), "{reply}");
    let out = xtimer(&node.base, &["export", "--app", APP], None).await;
    let out = xtimer(&node.base, &["apply", "-f", "-"], Some(stdout(&out))).await;
    assert_eq!(
        stdout(&out),
        "unchanged gitops/once\n0 created, 0 updated, 1 unchanged, 0 deleted\n",
        "{}",
        stderr(&out)
    );
    // Past the second of leeway a new runAt has.
    let leeway_over = run_at_ms + 1_100 - crate::helpers::now_ms();
    tokio::time::sleep(std::time::Duration::from_millis(leeway_over.max(0) as u64)).await;
    let mut changed = once.clone();
    changed["notifyHTTPParam"]["url"] = json!("http://127.0.0.1:9/other");
    let reply = apply(json!([changed])).await;
    assert_eq!(reply["code"], 400, "{reply}");
    assert!(reply["msg"].as_str().unwrap().starts_with("timers[0].runAt: "), "{reply}");
    assert!(reply["msg"].as_str().unwrap().contains("is in the past"), "{reply}");
    node.stop().await;
}

/// With auth on, an app's token applies its own app only, and the history
/// names it; the CLI sends the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apps_token_applies_only_its_app_and_is_named_in_the_history() {
    let storage = Storage::new(Stack::Embedded).await;
    let mut config = storage.config.clone();
    config.auth.enabled = true;
    config.auth.admin_token = Secret::new("it-admin");
    for app in [APP, "other"] {
        config.auth.apps.insert(
            app.into(),
            AppCredentials { token: Secret::new(format!("{app}-token")), secret: Secret::new("s") },
        );
    }
    let node = TestNode::spawn_with(config).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.yaml");
    std::fs::write(
        &file,
        "timers:\n  - name: nightly\n    cron: 0 30 2 * * ?\n    notifyHTTPParam:\n      url: http://127.0.0.1:9/n\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();

    let out = xtimer(&node.base, &["apply", "-f", path, "--app", APP, "--token", "other-token"], None).await;
    assert_eq!(code(&out), exit::DENIED, "another app's token: {}", stderr(&out));
    let out = xtimer(&node.base, &["apply", "-f", path, "--app", APP, "--token", "gitops-token"], None).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    assert_eq!(stdout(&out), "created   gitops/nightly\n1 created, 0 updated, 0 unchanged, 0 deleted\n");

    let url = format!("{}/api/xtimer/getAppTimers?app={APP}", node.base);
    let list: Value = node.http.get(url).bearer_auth("gitops-token").send().await.unwrap().json().await.unwrap();
    let id = list["result"]["list"][0]["id"].as_i64().unwrap_or_else(|| panic!("{list}"));
    let url = format!("{}/api/xtimer/getTimerHistory?id={id}&app={APP}", node.base);
    let h: Value = node.http.get(url).bearer_auth("gitops-token").send().await.unwrap().json().await.unwrap();
    assert_eq!(h["result"]["list"][0]["action"], "apply", "{h}");
    assert_eq!(h["result"]["list"][0]["by"], "app:gitops", "{h}");

    let out = xtimer(&node.base, &["export", "--app", APP, "--token", "gitops-token"], None).await;
    assert_eq!(code(&out), exit::OK, "{}", stderr(&out));
    let out = xtimer(&node.base, &["apply", "-f", "-", "--token", "gitops-token"], Some(stdout(&out))).await;
    assert_eq!(stdout(&out), "unchanged gitops/nightly\n0 created, 0 updated, 1 unchanged, 0 deleted\n");
    node.stop().await;
}
