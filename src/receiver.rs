//! A callback receiver on loopback that records every request and when it
//! arrived. The benchmark and the end-to-end tests point timers at it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::Router;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Hit {
    /// `Idempotency-Key` header.
    pub key: String,
    /// `X-Xtimer-Run-Time` header, ms.
    pub run_ms: i64,
    /// When it arrived, Unix microseconds.
    pub arrival_us: i64,
    pub method: Method,
    /// The request's path and query.
    pub uri: Uri,
    /// Request headers (only when started `detailed`).
    pub headers: Option<HeaderMap>,
    pub body: Bytes,
}

impl Hit {
    /// Arrival minus scheduled time, milliseconds.
    pub fn lateness_ms(&self) -> f64 {
        (self.arrival_us - self.run_ms * 1000) as f64 / 1000.0
    }
}

/// How the receiver answers a request, instead of its 200 (or
/// [`Receiver::fail_first`]'s 500): a status and headers.
pub type Reply = (StatusCode, Vec<(&'static str, String)>);

/// Picks the reply to a request from its path and how many requests of
/// that path arrived before it and this one (1 for the first).
pub type Script = Arc<dyn Fn(&str, u32) -> Option<Reply> + Send + Sync>;

#[derive(Default)]
struct Shared {
    hits: Mutex<Vec<Hit>>,
    attempts: Mutex<HashMap<String, u32>>,
    fail_first: AtomicU32,
    script: Mutex<Option<Script>>,
    per_path: Mutex<HashMap<String, u32>>,
    arrived: Notify,
    detailed: bool,
}

/// A running receiver.
pub struct Receiver {
    /// Where it listens.
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Receiver {
    /// Starts on 127.0.0.1 on a free port; `detailed` keeps every request's headers.
    pub async fn start(detailed: bool) -> std::io::Result<Self> {
        let shared = Arc::new(Shared { detailed, ..Default::default() });
        let app = Router::new().fallback(record).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let s = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).with_graceful_shutdown(s.cancelled_owned()).await;
        });
        Ok(Self { addr, shared, stop })
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Answers 500 to the first `n` requests of every idempotency key, then 200.
    pub fn fail_first(&self, n: u32) {
        self.shared.fail_first.store(n, Ordering::SeqCst);
    }

    /// Answers as `script` says where it returns a reply (else as before).
    pub fn script(&self, script: impl Fn(&str, u32) -> Option<Reply> + Send + Sync + 'static) {
        *self.shared.script.lock().expect("script") = Some(Arc::new(script));
    }

    /// Everything received so far, in arrival order.
    pub fn hits(&self) -> Vec<Hit> {
        self.shared.hits.lock().expect("hits").clone()
    }

    /// How many requests arrived.
    pub fn count(&self) -> usize {
        self.shared.hits.lock().expect("hits").len()
    }

    /// Waits until `done(hits)` holds, or `timeout` passes; returns whether it held.
    /// Checks on arrivals, at most every 100 ms (checking per request would
    /// make a wait on N hits cost O(N²) under load).
    pub async fn wait_until(&self, timeout: Duration, done: impl Fn(&[Hit]) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let arrived = self.shared.arrived.notified();
            if done(&self.shared.hits.lock().expect("hits")) {
                return true;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                return done(&self.shared.hits.lock().expect("hits"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn record(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap) {
    let arrival_us = chrono::Utc::now().timestamp_micros();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let key = header("idempotency-key");
    let run_ms = header("x-xtimer-run-time").parse().unwrap_or_default();
    let fail_first = shared.fail_first.load(Ordering::SeqCst);
    let status = if fail_first == 0 {
        StatusCode::OK
    } else {
        let mut attempts = shared.attempts.lock().expect("attempts");
        let n = attempts.entry(key.clone()).or_default();
        *n += 1;
        if *n <= fail_first {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        }
    };
    let script = shared.script.lock().expect("script").clone();
    let scripted = script.and_then(|script| {
        let nth = {
            let mut per_path = shared.per_path.lock().expect("per path");
            let n = per_path.entry(uri.path().to_owned()).or_default();
            *n += 1;
            *n
        };
        script(uri.path(), nth)
    });
    let (status, reply_headers) = match scripted {
        Some((status, headers)) => {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                if let Ok(value) = value.parse() {
                    map.insert(name, value);
                }
            }
            (status, map)
        }
        None => (status, HeaderMap::new()),
    };
    let headers = shared.detailed.then_some(headers);
    // A copy: the received Bytes may pin hyper's whole read buffer.
    let body = Bytes::copy_from_slice(&body);
    shared.hits.lock().expect("hits").push(Hit { key, run_ms, arrival_us, method, uri, headers, body });
    shared.arrived.notify_waiters();
    (status, reply_headers)
}
