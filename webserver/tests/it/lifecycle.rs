//! enableTimer, unableTimer, delTimer, and who may call them.

use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{once_timer, spawn_app, NOW_MS};

#[tokio::test]
async fn enable_disable_delete_lifecycle() {
    let app = spawn_app().await;
    let id = app.create_ok(&once_timer("a", "t", NOW_MS + 30_000)).await;
    assert_eq!(app.tasks(id, "a", "").await["total"], 0);

    assert_eq!(app.by_id("enableTimer", id, "a").await.ok(), &json!({"id": id}));
    assert_eq!(app.timer(id, "a").await["status"], 2);
    // Enabling expanded the timer into its fire before answering.
    let tasks = app.tasks(id, "a", "&status=0&upcoming=true").await;
    assert_eq!(tasks["total"], 1, "{tasks}");
    assert_eq!(tasks["list"][0]["runTimer"], NOW_MS + 30_000);
    // Enabling again is harmless and adds no second fire.
    app.by_id("enableTimer", id, "a").await.ok();
    assert_eq!(app.tasks(id, "a", "&upcoming=true").await["total"], 1);

    app.clock.advance(1_000);
    assert_eq!(app.by_id("unableTimer", id, "a").await.ok(), &json!({"id": id}));
    let timer = app.timer(id, "a").await;
    assert_eq!(timer["status"], 1);
    assert_eq!(timer["modifyTime"], "2030-01-01T00:00:01.000Z");
    assert_eq!(timer["createTime"], "2030-01-01T00:00:00.000Z");

    assert_eq!(app.delete(id, "a").await.ok(), &json!({"id": id}));
    // From here on it is gone (`a_deleted_timer_is_gone_from_every_route`).
    app.by_id("getTimer", id, "a").await.err(StatusCode::NOT_FOUND);
}

/// The one 404 message of a timer that is unknown, deleted or another app's.
fn not_found(id: i64, app: &str) -> String {
    format!("timer {id} not found in app `{app}` (it may have been deleted)")
}

#[tokio::test]
async fn a_deleted_timer_is_gone_from_every_route() {
    let app = spawn_app().await;
    let mut body = once_timer("a", "t", NOW_MS + 30_000);
    body["status"] = json!(2);
    let id = app.create_ok(&body).await;
    let kept = app.create_ok(&once_timer("a", "kept", NOW_MS + 30_000)).await;
    assert_eq!(app.tasks(id, "a", "&upcoming=true").await["total"], 1, "it has a fire before the delete");
    assert_eq!(app.delete(id, "a").await.ok(), &json!({"id": id}));

    let want = not_found(id, "a");
    for route in ["getTimer", "enableTimer", "unableTimer", "getTimerTasks"] {
        assert_eq!(app.by_id(route, id, "a").await.err(StatusCode::NOT_FOUND), want, "{route}");
    }
    assert_eq!(app.tasks_reply(id, "a", "&status=0").await.err(StatusCode::NOT_FOUND), want);
    // A second delete, by query and by JSON body.
    assert_eq!(app.delete(id, "a").await.err(StatusCode::NOT_FOUND), want);
    let json_body = json!({"id": id, "app": "a"}).to_string();
    let reply = app.raw(Method::DELETE, "/xtimer/delTimer", Some("application/json"), json_body).await;
    assert_eq!(reply.err(StatusCode::NOT_FOUND), want);
    // The listing leaves it out.
    let list = app.get("/api/xtimer/getAppTimers?app=a").await;
    assert_eq!(list.ok()["total"], 1, "{}", list.body);
    assert_eq!(list.ok()["list"][0]["id"], kept);
    // Enabling it did not bring it back.
    assert_eq!(app.by_id("getTimer", id, "a").await.err(StatusCode::NOT_FOUND), want);
}

#[tokio::test]
async fn a_deleted_timer_answers_exactly_as_an_unknown_id() {
    let app = spawn_app().await;
    let id = app.create_ok(&once_timer("a", "t", NOW_MS + 30_000)).await;
    app.delete(id, "a").await.ok();
    let unknown = id + 1_000;
    for route in ["getTimer", "enableTimer", "unableTimer", "getTimerTasks"] {
        let deleted = app.by_id(route, id, "a").await;
        let never = app.by_id(route, unknown, "a").await;
        assert_eq!(deleted.err(StatusCode::NOT_FOUND), not_found(id, "a"), "{route}");
        assert_eq!(never.err(StatusCode::NOT_FOUND), not_found(unknown, "a"), "{route}");
        assert_eq!(deleted.body["code"], never.body["code"], "{route}");
    }
    assert_eq!(app.delete(unknown, "a").await.err(StatusCode::NOT_FOUND), not_found(unknown, "a"));
}

#[tokio::test]
async fn enabling_a_past_one_shot_still_gives_it_one_fire() {
    let app = spawn_app().await;
    let id = app.create_ok(&once_timer("a", "t", NOW_MS + 5_000)).await;
    app.clock.advance(60_000);
    app.by_id("enableTimer", id, "a").await.ok();
    let tasks = app.tasks(id, "a", "").await;
    assert_eq!(tasks["total"], 1, "{tasks}");
    assert_eq!(tasks["list"][0]["runTimer"], NOW_MS + 5_000);
}

#[tokio::test]
async fn another_apps_timer_is_a_404_and_stays_untouched() {
    let app = spawn_app().await;
    let id = app.create_ok(&once_timer("a", "t", NOW_MS + 30_000)).await;
    for route in ["getTimer", "enableTimer", "unableTimer", "getTimerTasks"] {
        let reply = app.by_id(route, id, "b").await;
        assert_eq!(reply.err(StatusCode::NOT_FOUND), not_found(id, "b"), "{route}");
    }
    app.delete(id, "b").await.err(StatusCode::NOT_FOUND);
    let timer = app.timer(id, "a").await;
    assert_eq!(timer["status"], 1);
    assert_eq!(app.tasks(id, "a", "").await["total"], 0);
}

#[tokio::test]
async fn unknown_id_is_a_404() {
    let app = spawn_app().await;
    for route in ["getTimer", "enableTimer", "unableTimer", "getTimerTasks"] {
        app.by_id(route, 424_242, "a").await.err(StatusCode::NOT_FOUND);
    }
    app.delete(424_242, "a").await.err(StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn del_timer_accepts_a_json_body() {
    let app = spawn_app().await;
    let id = app.create_ok(&once_timer("a", "t", NOW_MS + 30_000)).await;
    let body = json!({"id": id, "app": "a"}).to_string();
    let reply = app.raw(Method::DELETE, "/xtimer/delTimer", Some("application/json"), body.clone()).await;
    assert_eq!(reply.ok(), &json!({"id": id}));
    app.by_id("getTimer", id, "a").await.err(StatusCode::NOT_FOUND);
    // Also without a content type; now it is gone.
    app.raw(Method::DELETE, "/xtimer/delTimer", None, body).await.err(StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn del_timer_body_of_another_app_is_a_404() {
    let app = spawn_app().await;
    let id = app.create_ok(&once_timer("a", "t", NOW_MS + 30_000)).await;
    let body = json!({"id": id, "app": "b"}).to_string();
    app.raw(Method::DELETE, "/xtimer/delTimer", Some("application/json"), body).await.err(StatusCode::NOT_FOUND);
    assert_eq!(app.timer(id, "a").await["status"], 1);
}

#[tokio::test]
async fn an_enabled_timer_shows_its_next_fire_and_a_disabled_one_none() {
    let app = spawn_app().await;
    // Hourly on the hour, in a zone 5 h behind UTC: NOW_MS is midnight UTC.
    let mut cron = crate::helpers::cron_timer("a", "hourly");
    cron["timezone"] = json!("America/New_York");
    let id = app.create_ok(&cron).await;
    let timer = app.timer(id, "a").await;
    assert_eq!((timer["nextRunTimer"].clone(), timer["nextRunTime"].clone()), (json!(null), json!(null)), "disabled");
    app.by_id("enableTimer", id, "a").await.ok();
    app.clock.advance(1_000);
    let timer = app.timer(id, "a").await;
    assert_eq!(timer["nextRunTimer"], NOW_MS + 3_600_000, "{timer}");
    assert_eq!(timer["nextRunTime"], "2030-01-01T01:00:00.000Z");
    let listed = app.get("/api/xtimer/getAppTimers?app=a").await.ok().clone();
    assert_eq!(listed["list"][0]["nextRunTimer"], NOW_MS + 3_600_000, "{listed}");

    let once = app.create_ok(&once_timer("a", "once", NOW_MS + 30_000)).await;
    app.by_id("enableTimer", once, "a").await.ok();
    assert_eq!(app.timer(once, "a").await["nextRunTimer"], NOW_MS + 30_000);
    app.clock.advance(30_000);
    assert_eq!(app.timer(once, "a").await["nextRunTimer"], json!(null), "its time has passed");
}
