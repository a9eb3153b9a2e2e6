//! `xtimer echo`: a callback receiver for trying xtimer out. It answers
//! every request `200 ok` and prints one line per request: the method and
//! path, the fire it belongs to (`Idempotency-Key`), how late it arrived
//! against its scheduled time (`X-Xtimer-Run-Time`), and the body.

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Uri};
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Bytes of a body shown on its line.
const BODY_SHOWN: usize = 200;

/// One request as `xtimer echo` prints it, received at `now_ms`.
pub fn describe(method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8], now_ms: i64) -> String {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mut line = format!("{method} {uri}");
    if let Some(key) = header("idempotency-key") {
        line.push_str(&format!(" fire {key}"));
    }
    if let Some(run_ms) = header("x-xtimer-run-time").and_then(|v| v.parse::<i64>().ok()) {
        line.push_str(&format!(" ({} ms late)", now_ms - run_ms));
    }
    let shown = &body[..body.len().min(BODY_SHOWN)];
    let text = String::from_utf8_lossy(shown);
    let more = if body.len() > BODY_SHOWN { "..." } else { "" };
    line.push_str(&format!(" body {text:?}{more}"));
    line
}

/// Answers `200 ok` on `listener` and prints each request until `shutdown`.
pub async fn serve(listener: TcpListener, shutdown: CancellationToken) -> std::io::Result<()> {
    let app = Router::new().fallback(|method: Method, uri: Uri, headers: HeaderMap, body: Bytes| async move {
        println!("{}", describe(&method, &uri, &headers, &body, chrono::Utc::now().timestamp_millis()));
        "ok"
    });
    axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fire_is_printed_with_its_key_its_lateness_and_its_body() {
        let mut headers = HeaderMap::new();
        headers.insert("idempotency-key", "7_1000".parse().unwrap());
        headers.insert("x-xtimer-run-time", "1000".parse().unwrap());
        let line = describe(&Method::POST, &"/hook".parse().unwrap(), &headers, br#"{"a":1}"#, 1_004);
        assert_eq!(line, r#"POST /hook fire 7_1000 (4 ms late) body "{\"a\":1}""#);
        let long = vec![b'x'; 300];
        let line = describe(&Method::GET, &"/".parse().unwrap(), &HeaderMap::new(), &long, 0);
        assert!(line.ends_with("x\"..."), "{line}");
    }
}
