//! The rate limiter's answer.

use super::*;

/// With a rate limit on, a caller over it gets a 429 in the envelope, naming
/// the limit, with `Retry-After`, on both APIs (one bucket per app). On
/// `/v1` that is the timer API's envelope, not an asyncflow code: Go workers
/// still read a non-zero `code` as an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limiter_answers_429_in_the_envelope() {
    let storage = Storage::new(Stack::Embedded).await;
    let mut config = storage.config.clone();
    config.auth.enabled = true;
    let credentials = AppCredentials { token: Secret::new("adv-alpha-token"), secret: Secret::default() };
    config.auth.apps.insert("alpha".into(), credentials);
    config.limits.requests_per_second = 1;
    config.limits.request_burst = 3;
    let node = TestNode::spawn_with(config).await;
    let paths = ["/api/xtimer/getTimer?id=424242&app=alpha", "/v1/get_task?task_id=0a1b_lark_1"];
    let mut statuses = Vec::new();
    for path in paths.iter().flat_map(|p| [p; 3]) {
        let resp = node.http.get(format!("{}{path}", node.base)).bearer_auth("adv-alpha-token").send().await.unwrap();
        let status = resp.status();
        let retry_after = resp.headers().get(RETRY_AFTER).cloned();
        let body: Value = resp.json().await.unwrap();
        statuses.push(status.as_u16());
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(body["code"], 429, "{body}");
            assert!(body["msg"].as_str().unwrap().contains("limits.requests_per_second"), "{body}");
            assert!(retry_after.is_some(), "Retry-After on {path}");
        }
    }
    // The burst of 3 (a bucket refills at 1/s; these calls take milliseconds), then the limit.
    assert_eq!(statuses[..4], [404, 404, 404, 429], "{statuses:?}");
    node.stop().await;
}
