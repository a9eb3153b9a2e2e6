//! Health, both URL prefixes, fallbacks, and 5xx replies.

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::{Method, StatusCode};
use serde_json::json;
use xtimer_core::config::ServerConfig;
use xtimer_core::fire::{ClaimedFire, Fire, FireKey, FireStatus};
use xtimer_core::timer::{NewTimer, Timer, TimerStatus};
use xtimer_store::{Change, ClaimOutcome, FireRepo, FireResult, NewFire, Overdue, Quota, TimerQuery, TimerRepo};
use xtimer_webserver::error::INTERNAL_ERROR_MSG;

use crate::helpers::{cron_timer, once_timer, spawn_app, spawn_app_with, Fakes, NOW_MS};

#[tokio::test]
async fn healthz_answers_ok_in_the_envelope() {
    let app = spawn_app().await;
    assert_eq!(app.get("/healthz").await.ok(), &json!({"status": "ok"}));
}

#[tokio::test]
async fn every_route_answers_with_and_without_api() {
    let app = spawn_app().await;
    for base in ["/api/xtimer", "/xtimer"] {
        let app_name = format!("app{}", base.len());
        let mut body = once_timer(&app_name, "t", NOW_MS + 60_000);
        body["status"] = json!(2);
        let id = app.post_json(&format!("{base}/createTimer"), &body).await.ok()["id"].as_i64().unwrap();
        let q = format!("id={id}&app={app_name}");
        assert_eq!(app.get(&format!("{base}/getTimer?{q}")).await.ok()["status"], 2, "{base}");
        assert_eq!(app.get(&format!("{base}/getTimerTasks?{q}&upcoming=true")).await.ok()["total"], 1, "{base}");
        assert_eq!(app.get(&format!("{base}/getAppTimers?app={app_name}")).await.ok()["total"], 1, "{base}");
        assert_eq!(app.get(&format!("{base}/unableTimer?{q}")).await.ok()["id"], id, "{base}");
        assert_eq!(app.get(&format!("{base}/getTimer?{q}")).await.ok()["status"], 1, "{base}");
        assert_eq!(app.get(&format!("{base}/enableTimer?{q}")).await.ok()["id"], id, "{base}");
        assert_eq!(app.get(&format!("{base}/getTimer?{q}")).await.ok()["status"], 2, "{base}");
        let reply = app.raw(Method::DELETE, &format!("{base}/delTimer?{q}"), None, "").await;
        assert_eq!(reply.ok()["id"], id, "{base}");
        app.get(&format!("{base}/getTimer?{q}")).await.err(StatusCode::NOT_FOUND);
    }
}

#[tokio::test]
async fn unknown_route_and_wrong_method_answer_in_the_envelope() {
    let app = spawn_app().await;
    let msg = app.get("/xtimer/nope").await.err(StatusCode::NOT_FOUND).to_owned();
    assert!(msg.contains("GET /xtimer/nope"), "{msg}");
    let msg = app.get("/api/xtimer/createTimer").await.err(StatusCode::METHOD_NOT_ALLOWED).to_owned();
    assert!(msg.contains("GET") && msg.contains("/api/xtimer/createTimer"), "{msg}");
    let reply = app.raw(Method::POST, "/xtimer/delTimer?id=1&app=a", None, "").await;
    reply.err(StatusCode::METHOD_NOT_ALLOWED);
}

/// A timer repo that fails (or panics) on every call.
struct BrokenTimers {
    panic: bool,
}

impl BrokenTimers {
    fn fail<T>(&self) -> xtimer_store::Result<T> {
        if self.panic {
            panic!("the timer repo exploded");
        }
        Err(xtimer_store::Error::Corrupt("secret detail of t_timer 7".into()))
    }
}

#[async_trait]
impl TimerRepo for BrokenTimers {
    async fn count_timers_by_status(&self) -> xtimer_store::Result<Vec<(TimerStatus, u64)>> {
        self.fail()
    }
    async fn create_each(
        &self,
        _: &[NewTimer],
        _: i64,
        _: &Quota,
    ) -> xtimer_store::Result<Vec<Result<i64, xtimer_store::Refusal>>> {
        self.fail()
    }
    async fn create_timers_within(&self, _: &[NewTimer], _: i64, _: &Quota) -> xtimer_store::Result<Vec<i64>> {
        self.fail()
    }
    async fn forget_minutes(&self, _: i64) -> xtimer_store::Result<u64> {
        self.fail()
    }
    async fn update_timer(
        &self,
        _: i64,
        _: &NewTimer,
        _: i64,
        _: &Quota,
        _: Change<'_>,
        _: &serde_json::Value,
    ) -> xtimer_store::Result<bool> {
        self.fail()
    }
    async fn pause_if_failing_as(
        &self,
        _: i64,
        _: i64,
        _: u32,
        _: i64,
        _: &str,
        _: i64,
        _: Change<'_>,
    ) -> xtimer_store::Result<bool> {
        self.fail()
    }
    async fn get_timer(&self, _: i64) -> xtimer_store::Result<Option<Timer>> {
        self.fail()
    }
    async fn get_timers(&self, _: &[i64]) -> xtimer_store::Result<Vec<Timer>> {
        self.fail()
    }
    async fn find_timers(&self, _: &str, _: &TimerQuery, _: u64, _: u64) -> xtimer_store::Result<(Vec<Timer>, u64)> {
        self.fail()
    }
    async fn find_timer_ids(
        &self,
        _: &str,
        _: &TimerQuery,
        _: i64,
        _: u32,
    ) -> xtimer_store::Result<Vec<(i64, TimerStatus)>> {
        self.fail()
    }
    async fn set_status_within(
        &self,
        _: i64,
        _: TimerStatus,
        _: i64,
        _: &Quota,
        _: Change<'_>,
    ) -> xtimer_store::Result<bool> {
        self.fail()
    }
    async fn enabled_timers(&self, _: i64, _: u32) -> xtimer_store::Result<Vec<Timer>> {
        self.fail()
    }
    async fn due_timers(&self, _: i64, _: u32) -> xtimer_store::Result<Vec<Timer>> {
        self.fail()
    }
    async fn set_next_runs(&self, _: &[(i64, Option<i64>)]) -> xtimer_store::Result<()> {
        self.fail()
    }
    async fn complete_fired_once(&self, _: i64) -> xtimer_store::Result<u64> {
        self.fail()
    }
}

#[tokio::test]
async fn store_failure_is_a_generic_500() {
    let app = spawn_app_with(
        ServerConfig::default(),
        Fakes { timers: Some(Arc::new(BrokenTimers { panic: false })), ..Fakes::default() },
    )
    .await;
    let reply = app.create(&cron_timer("a", "t")).await;
    assert_eq!(reply.err(StatusCode::INTERNAL_SERVER_ERROR), INTERNAL_ERROR_MSG);
    assert!(!reply.body.to_string().contains("secret"), "{}", reply.body);
    for uri in ["/xtimer/getTimer?id=1&app=a", "/xtimer/getAppTimers?app=a", "/xtimer/enableTimer?id=1&app=a"] {
        assert_eq!(app.get(uri).await.err(StatusCode::INTERNAL_SERVER_ERROR), INTERNAL_ERROR_MSG, "{uri}");
    }
    // Validation still comes first.
    app.create(&json!({})).await.err(StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn panicking_handler_is_a_500_in_the_envelope() {
    let app = spawn_app_with(
        ServerConfig::default(),
        Fakes { timers: Some(Arc::new(BrokenTimers { panic: true })), ..Fakes::default() },
    )
    .await;
    let reply = app.get("/xtimer/getTimer?id=1&app=a").await;
    assert_eq!(reply.err(StatusCode::INTERNAL_SERVER_ERROR), INTERNAL_ERROR_MSG);
    // The server keeps answering.
    assert_eq!(app.get("/healthz").await.ok()["status"], "ok");
}

/// A fire repo whose every call fails.
struct BrokenFires;

fn store_down<T>() -> xtimer_store::Result<T> {
    Err(xtimer_store::Error::Corrupt("fire store down".into()))
}

#[async_trait]
impl FireRepo for BrokenFires {
    async fn ended_since(&self, _: i64, _: u32) -> xtimer_store::Result<Vec<Fire>> {
        store_down()
    }
    async fn insert_fires(&self, _: &[NewFire], _: i64) -> xtimer_store::Result<u64> {
        store_down()
    }
    async fn insert_manual_fire(&self, _: &NewFire, _: i64) -> xtimer_store::Result<bool> {
        store_down()
    }
    async fn delete_pending_from(&self, _: i64, _: i64) -> xtimer_store::Result<u64> {
        store_down()
    }
    async fn insert_backfill(&self, _: &[xtimer_store::BackfillFire], _: i64) -> xtimer_store::Result<u64> {
        store_down()
    }
    async fn run_times_between(&self, _: i64, _: i64, _: i64) -> xtimer_store::Result<Vec<i64>> {
        store_down()
    }
    async fn running_before(&self, _: i64, _: i64, _: i64) -> xtimer_store::Result<u64> {
        store_down()
    }
    async fn delete_ended_before(&self, _: i64, _: u32) -> xtimer_store::Result<u64> {
        store_down()
    }
    async fn maintain_partitions(&self, _: i64, _: i64) -> xtimer_store::Result<xtimer_store::PartitionReport> {
        store_down()
    }
    async fn list_fires_in(
        &self,
        _: i64,
        _: Option<FireStatus>,
        _: xtimer_store::FireWindow,
        _: u64,
        _: u64,
    ) -> xtimer_store::Result<(Vec<Fire>, u64)> {
        store_down()
    }
    async fn pending_between(&self, _: Option<i64>, _: i64, _: i64, _: u32) -> xtimer_store::Result<Vec<FireKey>> {
        store_down()
    }
    async fn claim(&self, _: &[FireKey], _: &str, _: i64, _: i64) -> xtimer_store::Result<ClaimOutcome> {
        store_down()
    }
    async fn reclaim(&self, _: &[i64], _: &str, _: i64, _: i64, _: i64) -> xtimer_store::Result<ClaimOutcome> {
        store_down()
    }
    async fn record(&self, _: &[FireResult], _: i64) -> xtimer_store::Result<u64> {
        store_down()
    }
    async fn release(&self, _: &[ClaimedFire], _: i64) -> xtimer_store::Result<u64> {
        store_down()
    }
    async fn confirm_claims(&self, _: &str, _: &[ClaimedFire], _: i64, _: i64) -> xtimer_store::Result<Vec<i64>> {
        store_down()
    }
    async fn mark_missed(&self, _: &[i64], _: &str, _: i64) -> xtimer_store::Result<u64> {
        store_down()
    }
    async fn overdue(&self, _: i64, _: i64, _: i64, _: u32) -> xtimer_store::Result<Vec<Overdue>> {
        store_down()
    }
    async fn list_fires(
        &self,
        _: i64,
        _: Option<FireStatus>,
        _: u64,
        _: u64,
    ) -> xtimer_store::Result<(Vec<Fire>, u64)> {
        store_down()
    }
}

#[tokio::test]
async fn failed_expansion_on_create_is_a_500_that_leaves_the_name_free() {
    let fakes = Fakes { migrator_fires: Some(Arc::new(BrokenFires)), ..Fakes::default() };
    let app = spawn_app_with(ServerConfig::default(), fakes).await;
    let mut body = once_timer("a", "t", NOW_MS + 2_000);
    body["status"] = json!(2);
    assert_eq!(app.create(&body).await.err(StatusCode::INTERNAL_SERVER_ERROR), INTERNAL_ERROR_MSG);
    // The half-made timer was deleted, so a retry can use the name.
    let listed = app.get("/xtimer/getAppTimers?app=a").await;
    assert_eq!(listed.ok()["total"], 0, "{}", listed.body);
    let id = app.create_ok(&once_timer("a", "t", NOW_MS + 2_000)).await;
    // Enabling needs the expansion too: a 500, retried once the store is back.
    assert_eq!(app.by_id("enableTimer", id, "a").await.err(StatusCode::INTERNAL_SERVER_ERROR), INTERNAL_ERROR_MSG);
}

#[tokio::test]
async fn a_wrong_method_answers_405_with_allow_and_names_the_methods_the_route_takes() {
    use tower::ServiceExt;
    let app = spawn_app().await;
    let request = axum::http::Request::get("/api/xtimer/createTimer").body(axum::body::Body::empty()).unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let allow = response.headers().get("allow").map(|v| v.to_str().unwrap().to_string());
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(allow.as_deref(), Some("POST"), "{body}");
    let msg = body["msg"].as_str().unwrap();
    assert!(msg.contains("method GET is not allowed on /api/xtimer/createTimer") && msg.contains("use POST"), "{msg}");
}
