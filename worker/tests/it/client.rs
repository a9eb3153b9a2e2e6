//! What the client sends, byte for byte where Go workers are particular.

use reqwest::Method;
use xtimer_worker::{Error, TaskData};

use crate::helpers::{cfg, task, FakeServer};

#[tokio::test]
async fn hold_tasks_is_a_post_with_the_query_string_and_no_body() {
    let server = FakeServer::start(vec![]).await;
    server.push([task("t", "1"), task("t", "2"), task("t", "3")]);
    let held = server.client.hold_tasks("video_cut", 2).await.unwrap();
    assert_eq!(held.iter().map(|t| (t.task_id.as_str(), t.status)).collect::<Vec<_>>(), [("1", 2), ("2", 2)]);
    let seen = server.state.seen("hold_tasks");
    assert_eq!(seen[0].method, Method::POST);
    assert_eq!(seen[0].query, "task_type=video_cut&limit=2");
    assert_eq!((seen[0].content_type.as_deref(), seen[0].body.len()), (None, 0));
    assert_eq!(seen[0].authorization, None);
}

#[tokio::test]
async fn a_bearer_token_goes_with_every_call() {
    let server = FakeServer::start(vec![cfg("t")]).await;
    let client = server.client.clone().with_bearer_token("tok");
    client.get_task_schedule_cfg_list().await.unwrap();
    client.hold_tasks("t", 1).await.unwrap();
    for seen in server.state.seen.lock().unwrap().iter() {
        assert_eq!(seen.authorization.as_deref(), Some("Bearer tok"), "{}", seen.path);
    }
}

#[tokio::test]
async fn create_and_set_wrap_the_task_in_task_data() {
    let server = FakeServer::start(vec![]).await;
    let id = server
        .client
        .create_task(&TaskData { task_type: "t".into(), task_stage: "a".into(), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(id, "id_t_0");
    server.client.set_task(&TaskData { task_id: id, status: 3, ..Default::default() }).await.unwrap();
    let create = server.state.seen("create_task")[0].json();
    assert_eq!(create["task_data"]["task_type"], "t");
    assert_eq!(create["task_data"]["context"], "", "snake_case keys, `context` included");
    let set = &server.state.seen("set_task")[0];
    assert_eq!(set.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        (set.json()["task_data"]["task_id"].as_str(), set.json()["task_data"]["status"].as_i64()),
        (Some("id_t_0"), Some(3))
    );
}

#[tokio::test]
async fn register_task_sends_the_cfg_nested_without_times() {
    let server = FakeServer::start(vec![cfg("t")]).await;
    assert!(!server.client.register_task_if_missing(&cfg("t")).await.unwrap());
    assert!(server.client.register_task_if_missing(&cfg("u")).await.unwrap());
    let body = server.state.seen("register_task")[0].json();
    assert_eq!(body["task_config_data"]["task_type"], "u");
    assert_eq!(body["task_config_data"]["schedule_limit"], 10);
    assert!(body["task_config_data"].get("create_time").is_none());
}

#[tokio::test]
async fn a_non_zero_code_is_an_error_with_code_and_msg() {
    let server = FakeServer::start(vec![]).await;
    let err = server.client.get_task("nope").await.unwrap_err();
    assert_eq!(err.code(), Some(8035));
    assert!(err.to_string().contains("no such task"), "{err}");
    assert_eq!(server.state.seen("get_task")[0].query, "task_id=nope");
}

#[tokio::test]
async fn a_missing_route_is_an_http_status_error() {
    let server = FakeServer::start(vec![]).await;
    let err = server.client.get_task_counts_by_type("t").await.unwrap_err();
    assert!(matches!(err, Error::Status { status: 404, .. }), "{err:?}");
}
