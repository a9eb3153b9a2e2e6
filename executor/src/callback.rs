//! One HTTP callback: the request a fire sends and how its answer reads.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use reqwest::Method;
use xtimer_core::fire::FireKey;
use xtimer_core::timer::HttpNotify;

/// What the receiver made of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// 2xx within the timeout.
    pub success: bool,
    /// `HTTP 200: <first bytes of the body>` or the error.
    pub output: String,
}

/// Builds the HTTP client: keep-alive pool, timeout, no redirects (a
/// callback that redirects elsewhere is a failure to look at, not to follow).
pub fn client(timeout_ms: u64, pool_max_idle_per_host: usize) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(Duration::from_millis(timeout_ms))
        .connect_timeout(Duration::from_millis(timeout_ms.min(5_000)))
        .pool_max_idle_per_host(pool_max_idle_per_host)
        .pool_idle_timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none())
        .tcp_nodelay(true)
        .user_agent(concat!("xtimer/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Sends the callback of fire `key` and reads at most `max_output` bytes of the answer.
pub async fn call(client: &reqwest::Client, notify: &HttpNotify, key: FireKey, max_output: usize) -> Answer {
    match send(client, notify, key, max_output).await {
        Ok(answer) => answer,
        Err(err) => Answer { success: false, output: truncate(error_chain(&err), max_output) },
    }
}

async fn send(client: &reqwest::Client, n: &HttpNotify, key: FireKey, max_output: usize) -> reqwest::Result<Answer> {
    let method = Method::from_bytes(n.method.as_bytes()).unwrap_or(Method::POST);
    let mut headers = HeaderMap::with_capacity(n.headers.len() + 4);
    for (name, value) in &n.headers {
        // Validated at create time; anything odd that got stored is left out.
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
            headers.insert(name, value);
        }
    }
    if !headers.contains_key(CONTENT_TYPE) {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    headers.insert("x-xtimer-timer-id", HeaderValue::from(key.timer_id));
    headers.insert("x-xtimer-run-time", HeaderValue::from(key.run_ms));
    headers.insert("idempotency-key", HeaderValue::from_str(&key.to_string()).expect("digits and '_'"));
    let mut request = client.request(method, &n.url).headers(headers);
    if let Some(body) = &n.body {
        request = request.body(body.clone());
    }
    let mut response = request.send().await?;
    let status = response.status();
    let mut body = Vec::new();
    while body.len() < max_output {
        match response.chunk().await? {
            Some(chunk) => body.extend_from_slice(&chunk),
            None => break,
        }
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(max_output)]).into_owned();
    let output =
        if text.is_empty() { format!("HTTP {}", status.as_u16()) } else { format!("HTTP {}: {text}", status.as_u16()) };
    Ok(Answer { success: status.is_success(), output: truncate(output, max_output) })
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Cuts `text` to at most `max` bytes at a character boundary.
pub fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}
