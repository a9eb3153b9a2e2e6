//! Every refusal names the fix (issue 52): a mistyped field is answered
//! with the one meant, a status by name is taken, a wrong value names its
//! parameter and what it takes, the durations the console offers are
//! taken, every time takes RFC 3339, a URL of another scheme says which
//! schemes are called, and an unknown route close to a real one names it.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::json;
use tower::ServiceExt;

use crate::helpers::{cron_timer, patched, spawn_app, NOW_MS};

#[tokio::test]
async fn a_mistyped_field_is_answered_with_the_one_meant() {
    let app = spawn_app().await;
    let mut timer = cron_timer("a", "t");
    let notify = timer.as_object_mut().unwrap().remove("notifyHTTPParam").unwrap();
    timer["notifyHttpParam"] = notify;
    let msg = app.create(&timer).await.err(StatusCode::BAD_REQUEST).to_owned();
    assert_eq!(msg, "notifyHttpParam: unknown field `notifyHttpParam`: did you mean `notifyHTTPParam`?");

    // A typo of a nested field, and of a query parameter.
    let typo = patched(&cron_timer("a", "t"), "/notifyHTTPParam/methd", Some(json!("GET")));
    let msg = app.create(&typo).await.err(StatusCode::BAD_REQUEST).to_owned();
    assert_eq!(msg, "notifyHTTPParam.methd: unknown field `methd`: did you mean `method`?");
    let reply = app.get("/api/xtimer/getTimer?idd=1&app=a").await;
    assert_eq!(reply.err(StatusCode::BAD_REQUEST), "query string: idd: unknown field `idd`: did you mean `id`?");

    // An item of a batch, by its place.
    let mut item = cron_timer("a", "u");
    item["runat"] = json!(NOW_MS + 60_000);
    let body = json!({"timers": [cron_timer("a", "v"), item]});
    let msg = app.post_json("/api/xtimer/createTimers", &body).await.err(StatusCode::BAD_REQUEST).to_owned();
    assert!(msg.starts_with("timers[1]: unknown field `runat`: did you mean `runAt`?"), "{msg}");

    // Nothing near: the fields are listed, as before.
    let far = patched(&cron_timer("a", "t"), "/schedule", Some(json!("x")));
    let msg = app.create(&far).await.err(StatusCode::BAD_REQUEST).to_owned();
    assert!(msg.starts_with("schedule: unknown field `schedule`, expected one of `app`"), "{msg}");
}

#[tokio::test]
async fn a_status_is_taken_by_name_and_a_wrong_value_names_what_it_takes() {
    let app = spawn_app().await;
    let id = app.create_ok(&cron_timer("a", "t")).await;
    // By name, any case, as by code.
    for status in ["succeeded", "SUCCEEDED", "2"] {
        let reply = app.tasks_reply(id, "a", &format!("&status={status}")).await;
        assert_eq!(reply.ok()["total"], 0, "status={status}");
    }
    let reply = app.tasks_reply(id, "a", "&status=done").await;
    assert_eq!(
        reply.err(StatusCode::BAD_REQUEST),
        "query string: status: must be one of 0-5 or pending, running, succeeded, failed, skipped, missed, got `done`"
    );
    // A code out of range keeps its message.
    let reply = app.tasks_reply(id, "a", "&status=9").await;
    assert!(reply.err(StatusCode::BAD_REQUEST).starts_with("status: must be 0 (pending)"));

    // A timer's status by name in a search.
    let listed = app.get("/api/xtimer/getAppTimers?app=a&status=disabled").await;
    assert_eq!(listed.ok()["total"], 1);
    let listed = app.get("/api/xtimer/getAppTimers?app=a&status=enabled").await;
    assert_eq!(listed.ok()["total"], 0);
    let reply = app.get("/api/xtimer/getAppTimers?app=a&status=paused").await;
    assert_eq!(
        reply.err(StatusCode::BAD_REQUEST),
        "query string: status: must be one of 1, 2, 4 or disabled, enabled, completed, got `paused`"
    );

    // The document says a status is a string (a name or a code).
    let doc = app.get("/openapi.json").await.body;
    for path in ["/api/xtimer/getTimerTasks", "/api/xtimer/getAppTimers"] {
        let params = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
        let status = params.iter().find(|p| p["name"] == "status").unwrap();
        assert!(status["schema"]["type"].to_string().contains("string"), "{path}: {status}");
    }

    // A number that is not one: its name, what it takes, what was given.
    let reply = app.get("/api/xtimer/getTimer?id=abc&app=a").await;
    assert_eq!(reply.err(StatusCode::BAD_REQUEST), "query string: id: must be a whole number, got `abc`");
    let reply = app.get("/api/xtimer/getAppTimers?app=a&pageSize=ten").await;
    assert_eq!(reply.err(StatusCode::BAD_REQUEST), "query string: pageSize: must be a whole number, got `ten`");
    let reply = app.tasks_reply(id, "a", "&upcoming=yes").await;
    assert_eq!(reply.err(StatusCode::BAD_REQUEST), "query string: upcoming: must be true or false, got `yes`");
}

#[tokio::test]
async fn an_app_is_paused_for_a_duration_as_the_console_offers() {
    let app = spawn_app().await;
    app.create_ok(&cron_timer("a", "t")).await;
    for (until, ms) in [("30m", 1_800_000), ("2h", 7_200_000), ("1h30m", 5_400_000)] {
        let reply = app.post_json("/api/xtimer/pauseApp", &json!({"app": "a", "until": until})).await;
        assert_eq!(reply.ok()["pausedUntil"], NOW_MS + ms, "until {until}");
    }
    // RFC 3339 and Unix ms as before.
    let reply = app.post_json("/api/xtimer/pauseApp", &json!({"app": "a", "until": "2030-01-01T08:00:00Z"})).await;
    assert_eq!(reply.ok()["pausedUntil"], NOW_MS + 8 * 3_600_000);
    let reply = app.post_json("/api/xtimer/pauseApp", &json!({"app": "a", "until": NOW_MS + 60_000})).await;
    assert_eq!(reply.ok()["pausedUntil"], NOW_MS + 60_000);
    let reply = app.post_json("/api/xtimer/pauseApp", &json!({"app": "a", "until": "soon"})).await;
    let msg = reply.err(StatusCode::BAD_REQUEST);
    assert!(msg.starts_with("until: `soon` is neither a duration from now (`30m`, `2h`, `1d`)"), "{msg}");
}

#[tokio::test]
async fn every_route_that_takes_a_time_takes_rfc_3339() {
    let app = spawn_app().await;
    let id = app.create_ok(&patched(&cron_timer("a", "t"), "/status", Some(json!(2)))).await;
    let at = "2030-01-01T01:00:00Z";
    for path in [
        format!("/api/xtimer/explainFire?id={id}&app=a&runTimer={at}"),
        format!("/api/xtimer/previewCron?cron=0+*+*+*+*&from={at}"),
        format!("/api/xtimer/getForecast?app=a&from={at}"),
    ] {
        app.get(&path).await.ok();
    }
    let both = |from: &str, to: &str| json!({"id": id, "app": "a", "from": from, "to": to});
    let reply = app.post_json("/api/xtimer/backfillTimer", &both("2029-12-31T22:00:00Z", "2029-12-31T23:00:00Z")).await;
    reply.ok();
    let replay = json!({"app": "a", "from": "2029-12-31T22:00:00Z", "to": "2029-12-31T23:00:00Z", "dryRun": true});
    app.post_json("/api/xtimer/replayFires", &replay).await.ok();
    let timer = patched(&cron_timer("a", "bounded"), "/startAt", Some(json!(at)));
    app.create_ok(&patched(&timer, "/endAt", Some(json!("2030-02-01T00:00:00+08:00")))).await;
    let calendar = json!({"app": "a", "name": "off", "ranges": [{"from": at, "to": "2030-01-02T00:00:00Z"}]});
    app.post_json("/api/xtimer/putCalendar", &calendar).await.ok();
}

#[tokio::test]
async fn a_callback_of_another_scheme_says_only_http_and_https_are_called() {
    let app = spawn_app().await;
    for url in ["file:///etc/passwd", "ftp://host/p", "gopher://h:70/x"] {
        let timer = patched(&cron_timer("a", "t"), "/notifyHTTPParam/url", Some(json!(url)));
        let msg = app.create(&timer).await.err(StatusCode::BAD_REQUEST).to_owned();
        assert!(msg.contains("only http and https URLs can be called"), "{url}: {msg}");
        assert!(!msg.contains("invalid format"), "{url}: {msg}");
    }
}

#[tokio::test]
async fn an_unknown_route_near_a_real_one_names_it() {
    let app = spawn_app().await;
    let reply = app.get("/api/xtimer/getTimers").await;
    assert_eq!(
        reply.err(StatusCode::NOT_FOUND),
        "no route for GET /api/xtimer/getTimers: did you mean `GET /api/xtimer/getAppTimers` or \
         `GET /api/xtimer/getTimer`?"
    );
    let reply = app.raw(Method::POST, "/xtimer/createtimer", Some("application/json"), "{}").await;
    let msg = reply.err(StatusCode::NOT_FOUND);
    assert!(msg.starts_with("no route for POST /xtimer/createtimer: did you mean `POST /xtimer/createTimer`"), "{msg}");
    let reply = app.get("/api/xtimer/frobnicate").await;
    assert_eq!(reply.err(StatusCode::NOT_FOUND), "no route for GET /api/xtimer/frobnicate");
}

#[tokio::test]
async fn the_root_leads_to_the_console() {
    let app = spawn_app().await;
    let response = app.router.clone().oneshot(Request::get("/").body(Body::empty()).unwrap()).await.unwrap();
    assert!(response.status().is_redirection(), "{}", response.status());
    assert_eq!(response.headers()[header::LOCATION], "/ui");
}
