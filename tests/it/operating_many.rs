//! Operating many timers (API 1f), as a client and a receiver see it:
//! labels and the server-side search, bulk actions over a search, the
//! apps and their pauses.

use std::time::Duration;

use serde_json::{json, Value};
use xtimer::receiver::Receiver;

use xtimer_core::config::{AppCredentials, Secret};

use crate::helpers::{now_ms, Stack, Storage, TestNode, PATIENCE};

fn msg(reply: &Value) -> String {
    reply["msg"].as_str().unwrap_or_default().to_owned()
}

/// 200 labelled timers and two per-second ones: the search finds them by
/// label, name and status; a bulk disable of `team=a` changes exactly
/// those, a second run nothing, a dry run nothing; `team=b` keeps firing.
pub async fn labels_find_timers_and_bulk_actions_change_exactly_those(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let timers: Vec<Value> = (0..200)
        .map(|i| {
            let team = if i % 2 == 0 { "a" } else { "b" };
            json!({"app": "it", "name": format!("yearly-{i:03}"), "cron": "0 0 0 1 1 ?", "status": 2,
                   "labels": {"team": team, "tier": if i % 10 == 0 { "gold" } else { "plain" }},
                   "notifyHTTPParam": {"url": rx.url("/yearly")}})
        })
        .collect();
    let reply = app.post("createTimers", json!({ "timers": timers })).await;
    assert_eq!(reply["code"], 0, "{}", msg(&reply));
    for team in ["a", "b"] {
        app.create_ok(json!({"app": "it", "name": format!("Every-Second-{team}"), "cron": "* * * * * *", "status": 2,
                             "labels": {"team": team}, "notifyHTTPParam": {"url": rx.url(&format!("/{team}"))},
                             "retry": {"maxAttempts": 1}}))
            .await;
    }

    let search = |query: &str| {
        let path = format!("getAppTimers?app=it&pageSize=500&{query}");
        let app = &app;
        async move { app.get(&path).await }
    };
    let found = search("selector=team%3Da").await;
    assert_eq!(found["result"]["total"], 101, "{}", msg(&found));
    let found = search("selector=team%3Da%2Ctier%20in%20(gold)").await;
    assert_eq!(found["result"]["total"], 20, "{}", msg(&found));
    assert_eq!(found["result"]["list"][0]["labels"], json!({"team": "a", "tier": "gold"}));
    let found = search("selector=!tier").await;
    assert_eq!(found["result"]["total"], 2, "the two per-second timers have no tier");
    let found = search("q=every-second&selector=team!%3Da").await;
    assert_eq!(found["result"]["total"], 1, "name contains, any case; != excludes");
    assert_eq!(found["result"]["list"][0]["name"], "Every-Second-b");
    let paged = app.get("getAppTimers?app=it&selector=team%3Db&pageSize=30&pageIndex=4").await;
    assert_eq!(paged["result"]["total"], 101, "{}", msg(&paged));
    assert_eq!(paged["result"]["list"].as_array().unwrap().len(), 11, "pages run over the matches");

    let bulk = |body: Value| {
        let app = &app;
        async move { app.post("bulkTimers", body).await }
    };
    let dry = bulk(json!({"app": "it", "action": "disable", "selector": "team=a", "dryRun": true})).await;
    assert_eq!((dry["result"]["matched"].as_i64(), dry["result"]["changed"].as_i64()), (Some(101), Some(0)), "{dry}");
    assert_eq!(search("status=1").await["result"]["total"], 0, "a dry run changes nothing");

    let done = bulk(json!({"app": "it", "action": "disable", "selector": "team=a"})).await;
    assert_eq!(done["result"]["matched"], 101, "{}", msg(&done));
    assert_eq!(done["result"]["changed"], 101);
    assert_eq!(done["result"]["ids"].as_array().unwrap().len(), 101);
    let again = bulk(json!({"app": "it", "action": "disable", "selector": "team=a"})).await;
    assert_eq!((again["result"]["matched"].as_i64(), again["result"]["changed"].as_i64()), (Some(101), Some(0)));
    assert_eq!(search("status=1").await["result"]["total"], 101);
    assert_eq!(search("status=2&selector=team%3Db").await["result"]["total"], 101);

    // team=b fires on; team=a stopped (a fire claimed before the bulk may still go out).
    let a_before = hits_on(&rx, "/a");
    let b_before = hits_on(&rx, "/b");
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    assert!(hits_on(&rx, "/a") <= a_before + 1, "team=a is disabled");
    assert!(hits_on(&rx, "/b") >= b_before + 2, "team=b keeps firing");

    let bad = bulk(json!({"app": "it", "action": "delete"})).await;
    assert_eq!(bad["code"], 400, "{bad}");
    assert!(msg(&bad).contains("over a whole app must be asked for with a filter"), "{bad}");
    let bad = search("selector=team%3Da%20tier").await;
    assert_eq!(bad["code"], 400, "{bad}");
    assert!(msg(&bad).starts_with("selector: at character 7:"), "{bad}");
    let bad = app
        .create(json!({"app": "it", "name": "bad-labels", "cron": "* * * * * *",
                       "labels": {"Team": "a"}, "notifyHTTPParam": {"url": rx.url("/x")}}))
        .await;
    assert_eq!(bad["code"], 400, "{bad}");
    assert!(msg(&bad).starts_with("labels: key `Team`"), "{bad}");

    // Labels change with updateTimer, and the search follows.
    let id = search("q=yearly-000").await["result"]["list"][0]["id"].as_i64().unwrap();
    let updated = app.post("updateTimer", json!({"id": id, "app": "it", "labels": {"team": "c"}})).await;
    assert_eq!(updated["result"]["labels"], json!({"team": "c"}), "{updated}");
    // Its history: created, disabled by the bulk, its labels updated; by whom.
    let history = app.get(&format!("getTimerHistory?id={id}&app=it")).await;
    let list = history["result"]["list"].as_array().unwrap_or_else(|| panic!("{history}"));
    let actions: Vec<&str> = list.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["update", "bulk", "create"], "{history}");
    assert!(list.iter().all(|e| e["by"] == "anonymous"), "auth is off: {history}");
    assert_eq!(list[1]["changes"], json!({"status": [2, 1]}));
    assert_eq!(list[0]["changes"]["labels"], json!([{"team": "a", "tier": "gold"}, {"team": "c"}]));
    assert_eq!(search("selector=team%3Dc").await["result"]["total"], 1);
    assert_eq!(search("selector=tier").await["result"]["total"], 199, "its tier is gone");

    let apps = app.get("getApps").await;
    assert_eq!(
        apps["result"]["list"],
        json!([{"app": "it", "timers": 202, "enabled": 101, "paused": false,
                                               "pausedUntil": null}]),
        "{apps}"
    );
    app.stop().await;
}

/// `pauseApp` with `until` 5 s ahead: the fires due meanwhile are recorded
/// skipped with the reason and none is received; after it the fires go
/// out again; `getApps` shows the pause while it lasts.
pub async fn a_paused_app_skips_its_fires_until_it_resumes_by_itself(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let rx = Receiver::start(false).await.unwrap();
    let id = app
        .create_ok(json!({"app": "it", "name": "tick", "cron": "* * * * * *", "status": 2,
                          "notifyHTTPParam": {"url": rx.url("/tick")}, "retry": {"maxAttempts": 1}}))
        .await;
    assert!(rx.wait_until(PATIENCE, |h| !h.is_empty()).await, "fires before the pause");
    let paused_at = now_ms();
    let until = paused_at + 5_000;
    let reply = app.post("pauseApp", json!({"app": "it", "until": until, "reason": "maintenance"})).await;
    assert_eq!(reply["code"], 0, "{reply}");
    assert_eq!(reply["result"]["pausedUntil"], until);
    let apps = app.get("getApps").await;
    assert_eq!(apps["result"]["list"][0]["paused"], true, "{apps}");
    assert_eq!(apps["result"]["list"][0]["pausedUntil"], until);

    assert!(rx.wait_until(PATIENCE, |h| h.iter().any(|h| h.run_ms > until + 1_000)).await, "fires after the pause");
    // A node reads pauses at most a second old, and fires are claimed half a second ahead.
    let settled = paused_at + 1_600;
    let during: Vec<i64> = rx.hits().iter().map(|h| h.run_ms).filter(|run| (settled..until).contains(run)).collect();
    assert!(during.is_empty(), "none received while paused: {during:?}");
    let fires = app.fires(id, "it").await;
    let skipped: Vec<&Value> =
        fires.iter().filter(|f| (settled..until).contains(&f["runTimer"].as_i64().unwrap())).collect();
    assert!(skipped.len() >= 3, "the fires due while paused are recorded: {}", skipped.len());
    for fire in skipped {
        assert_eq!(fire["status"], 4, "{fire}");
        assert_eq!(fire["output"], "app paused: maintenance");
    }
    let apps = app.get("getApps").await;
    assert_eq!(apps["result"]["list"][0]["paused"], false, "resumed by itself: {apps}");

    let bad = app.post("pauseApp", json!({"app": "it", "until": now_ms() - 1_000})).await;
    assert_eq!(bad["code"], 400, "{bad}");
    assert!(msg(&bad).starts_with("until: must be after now"), "{bad}");
    app.stop().await;
}

/// How many requests `rx` got on `path`.
fn hits_on(rx: &Receiver, path: &str) -> usize {
    rx.hits().iter().filter(|h| h.uri.path() == path).count()
}

/// A timer's `description` (a field declared once, in the spec): shown by
/// `getTimer`, found by `q` (any case, not by another field's text),
/// changed and cleared by `updateTimer` and noted in the history, refused
/// over 1000 characters.
pub async fn a_description_is_shown_found_changed_and_limited(stack: Stack) {
    let app = TestNode::spawn(stack).await;
    let hook = "http://127.0.0.1:9/hook";
    let id = app
        .create_ok(json!({"app": "it", "name": "nightly", "cron": "0 0 2 * * ?", "spreadMs": 5000,
                          "description": "Sends the Invoices of the day", "notifyHTTPParam": {"url": hook}}))
        .await;
    app.create_ok(json!({"app": "it", "name": "other", "cron": "0 0 3 * * ?", "notifyHTTPParam": {"url": hook},
                         "labels": {"note": "invoices"}}))
        .await;
    let timer = app.get(&format!("getTimer?id={id}&app=it")).await;
    assert_eq!(timer["result"]["description"], "Sends the Invoices of the day", "{timer}");
    let found = app.get("getAppTimers?app=it&q=INVOICES").await;
    assert_eq!(found["result"]["total"], 1, "{found}");
    assert_eq!(found["result"]["list"][0]["id"], id);
    let found = app.get("getAppTimers?app=it&q=spreadMs").await;
    assert_eq!(found["result"]["total"], 0, "another field's text is not the description: {found}");

    let updated = app.post("updateTimer", json!({"id": id, "app": "it", "description": "Sends the receipts"})).await;
    assert_eq!(updated["result"]["description"], "Sends the receipts", "{updated}");
    assert_eq!(updated["result"]["spreadMs"], 5000, "the other fields are kept: {updated}");
    assert_eq!(app.get("getAppTimers?app=it&q=invoices").await["result"]["total"], 0);
    let history = app.get(&format!("getTimerHistory?id={id}&app=it")).await;
    assert_eq!(
        history["result"]["list"][0]["changes"]["description"],
        json!(["Sends the Invoices of the day", "Sends the receipts"]),
        "{history}"
    );
    let cleared = app.post("updateTimer", json!({"id": id, "app": "it", "description": null})).await;
    assert!(cleared["result"]["description"].is_null(), "{cleared}");

    let long = "x".repeat(1001);
    let refused = app.post("updateTimer", json!({"id": id, "app": "it", "description": long})).await;
    assert_eq!(refused["code"], 400, "{refused}");
    assert_eq!(msg(&refused), "description: must be at most 1000 characters, got 1001");
    app.stop().await;
}

crate::on_both_stacks!(
    a_description_is_shown_found_changed_and_limited,
    labels_find_timers_and_bulk_actions_change_exactly_those,
    a_paused_app_skips_its_fires_until_it_resumes_by_itself,
    an_apps_token_operates_only_its_app,
);

/// With auth on, an app's token sees and changes only its own app:
/// `getApps` lists it alone, another app's search, bulk, pause, replay and
/// history are refused (403); the admin sees every app; the history names
/// the token's app.
pub async fn an_apps_token_operates_only_its_app(stack: Stack) {
    let storage = Storage::new(stack).await;
    let mut config = storage.config.clone();
    config.auth.enabled = true;
    config.auth.admin_token = Secret::new("many-admin");
    for app in ["a", "b"] {
        config.auth.apps.insert(
            app.into(),
            AppCredentials { token: Secret::new(format!("token-{app}")), secret: Secret::new("s") },
        );
    }
    let node = TestNode::spawn_with(config).await;
    let call = |method: &str, path: &str, token: &str, body: Option<Value>| {
        let url = format!("{}/api/xtimer/{path}", node.base);
        let request = match body {
            Some(body) => node.http.request(method.parse().unwrap(), url).json(&body),
            None => node.http.request(method.parse().unwrap(), url),
        };
        let request = request.bearer_auth(token);
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let mut ids = Vec::new();
    for app in ["a", "b"] {
        let timer = json!({"app": app, "name": "t", "cron": "0 0 0 1 1 ?", "status": 2, "labels": {"team": "x"},
                           "notifyHTTPParam": {"url": "http://127.0.0.1:9/hook"}});
        let reply = call("POST", "createTimer", &format!("token-{app}"), Some(timer)).await;
        ids.push(reply["result"]["id"].as_i64().unwrap_or_else(|| panic!("{reply}")));
    }
    let apps = call("GET", "getApps", "token-a", None).await;
    assert_eq!(apps["result"]["list"].as_array().map(Vec::len), Some(1), "{apps}");
    assert_eq!(apps["result"]["list"][0]["app"], "a");
    let apps = call("GET", "getApps", "many-admin", None).await;
    assert_eq!(apps["result"]["list"].as_array().map(Vec::len), Some(2), "the admin sees every app: {apps}");

    let b = ids[1];
    for (method, path, body) in [
        ("GET", "getAppTimers?app=b&selector=team%3Dx".to_owned(), None),
        ("POST", "bulkTimers".to_owned(), Some(json!({"app": "b", "action": "disable", "selector": "team=x"}))),
        ("POST", "pauseApp".to_owned(), Some(json!({"app": "b"}))),
        ("POST", "replayFires".to_owned(), Some(json!({"app": "b", "from": 0, "to": 1000}))),
        ("GET", format!("getTimerHistory?id={b}&app=b"), None),
        ("GET", format!("getTimerHistory?id={b}&app=a"), None),
    ] {
        let reply = call(method, &path, "token-a", body).await;
        assert_eq!(reply["code"], 403, "{path}: {reply}");
    }
    let done =
        call("POST", "bulkTimers", "token-a", Some(json!({"app": "a", "action": "disable", "selector": "team=x"})))
            .await;
    assert_eq!(done["result"]["changed"], 1, "{done}");
    let history = call("GET", &format!("getTimerHistory?id={}&app=a", ids[0]), "token-a", None).await;
    assert_eq!(history["result"]["list"][0]["by"], "app:a", "{history}");
    assert_eq!(history["result"]["list"][0]["action"], "bulk");
    node.stop().await;
}
