//! What a newcomer trips over first (issue 31): a required field left out
//! is named by its path and said to be required, as every other field's
//! problem is, not in serde's words (`missing field `name` at line 1
//! column 84`).

use axum::http::{Method, StatusCode};

use crate::helpers::{cron_timer, patched, spawn_app};

#[tokio::test]
async fn a_missing_required_field_is_named_and_said_to_be_required() {
    let app = spawn_app().await;
    let timer = cron_timer("a", "t");
    for (path, wanted) in [
        ("/name", "name: is required"),
        ("/app", "app: is required"),
        ("/notifyHTTPParam/url", "notifyHTTPParam.url: is required"),
    ] {
        let reply = app.create(&patched(&timer, path, None)).await;
        let msg = reply.err(StatusCode::BAD_REQUEST);
        assert_eq!(msg, wanted, "{path} left out");
    }

    // The query string and a JSON body of the id routes say it alike.
    let reply = app.get("/api/xtimer/getTimer?app=a").await;
    assert_eq!(reply.err(StatusCode::BAD_REQUEST), "query string: id: is required");
    let reply = app.raw(Method::DELETE, "/api/xtimer/delTimer", None, r#"{"app": "a"}"#).await;
    assert_eq!(reply.err(StatusCode::BAD_REQUEST), "id: is required");

    // And an item of a batch, by its place.
    let mut unnamed = timer.clone();
    unnamed.as_object_mut().unwrap().remove("name");
    let body = serde_json::json!({"timers": [timer, unnamed]}).to_string();
    let reply = app.raw(Method::POST, "/api/xtimer/createTimers", Some("application/json"), body).await;
    assert_eq!(reply.err(StatusCode::BAD_REQUEST), "timers[1].name: is required");

    // Other problems keep their words (and the path they already had).
    let reply = app.create(&patched(&timer, "/name", Some(serde_json::json!(5)))).await;
    let msg = reply.err(StatusCode::BAD_REQUEST);
    assert!(msg.starts_with("name: invalid type: integer `5`"), "{msg}");
}
