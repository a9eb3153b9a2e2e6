//! Slow and silent clients against the real accept loop
//! ([`xtimer_webserver::serve::Server`]) on 127.0.0.1, driven with raw TCP:
//! request heads that never finish, bodies shorter than their
//! `Content-Length`, idle keep-alive connections, the connection cap, and
//! 2,000 half-open connections at once. Timeouts are short (300 ms) except
//! in the tests of the defaults.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{sleep, timeout, Instant};
use tokio_util::sync::CancellationToken;
use xtimer_core::config::{AuthConfig, CallbackConfig, Config, LimitsConfig, ServerConfig};
use xtimer_webserver::serve::Server;

use crate::helpers::{cron_timer, spawn_app_with, Fakes, TestApp};

/// The short timeout of most tests.
const SHORT: Duration = Duration::from_millis(300);
/// A timeout that never fires during a test.
const LONG: Duration = Duration::from_secs(30);

/// A server on a free port of 127.0.0.1, serving a [`TestApp`].
pub(crate) struct Served {
    pub(crate) addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<()>,
    _app: TestApp,
}

pub(crate) async fn serve(config: ServerConfig) -> Served {
    serve_with(config, Fakes::default()).await
}

async fn serve_with(config: ServerConfig, fakes: Fakes) -> Served {
    let app = spawn_app_with(config.clone(), fakes).await;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let stop = CancellationToken::new();
    let task = tokio::spawn(Server::new(listener, app.router.clone(), &config).run(stop.clone()));
    Served { addr, stop, task, _app: app }
}

/// Server settings with these header, body and idle timeouts.
fn limits(header: Duration, body: Duration, idle: Duration) -> ServerConfig {
    ServerConfig {
        header_read_timeout_ms: header.as_millis() as u64,
        body_read_timeout_ms: body.as_millis() as u64,
        idle_timeout_ms: idle.as_millis() as u64,
        ..ServerConfig::default()
    }
}

/// Reads until the server closes the connection (end of stream or a
/// reset), at most `within`; what was read and when it closed. Panics if
/// it is still open after `within`.
pub(crate) async fn read_to_close(stream: &mut (impl AsyncRead + Unpin), within: Duration) -> (String, Instant) {
    let mut seen = Vec::new();
    let outcome = timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
                Err(err) if err.kind() == ErrorKind::ConnectionReset => return,
                Err(err) => panic!("read failed: {err}"),
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(outcome.is_ok(), "the connection is still open after {within:?}; read so far: {text:?}");
    (text, Instant::now())
}

/// Reads one response (head and `Content-Length` body) off a connection
/// that stays open; its status, head and body.
pub(crate) async fn read_response(stream: &mut TcpStream) -> (u16, String, String) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let read = timeout(Duration::from_secs(5), async {
        loop {
            if let Some(end) = find(&seen, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().expect("content-length"));
                if seen.len() >= end + 4 + length {
                    return (end, length);
                }
            }
            let n = stream.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed mid-response: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    let (end, length) = read.expect("a response within 5 s");
    let head = String::from_utf8_lossy(&seen[..end]).into_owned();
    let body = String::from_utf8_lossy(&seen[end + 4..end + 4 + length]).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status line");
    (status, head, body)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

pub(crate) const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n";

/// Asserts `reply` (a whole response as read to its close) is the 408
/// envelope with `Connection: close`.
pub(crate) fn assert_body_timeout(reply: &str) {
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no response: {reply:?}"));
    assert!(head.starts_with("HTTP/1.1 408 "), "{reply}");
    assert!(head.to_ascii_lowercase().contains("\r\nconnection: close"), "{reply}");
    let body: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {reply}"));
    assert_eq!(body["code"], 408, "{body}");
    assert!(body["result"].is_null(), "{body}");
    let msg = body["msg"].as_str().expect("msg");
    assert!(msg.contains("server.body_read_timeout_ms") && msg.contains("300 ms"), "{msg}");
}

#[tokio::test]
async fn a_request_head_that_never_finishes_is_closed_at_the_header_timeout() {
    let served = serve(limits(SHORT, LONG, LONG)).await;
    let mut stream = TcpStream::connect(served.addr).await.unwrap();
    let sent = Instant::now();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n").await.unwrap();
    let (reply, closed) = read_to_close(&mut stream, Duration::from_secs(3)).await;
    assert_eq!(reply, "", "a cut-off head gets no answer");
    let took = closed - sent;
    assert!(took >= SHORT - Duration::from_millis(50) && took < SHORT * 4, "closed after {took:?}");
}

#[tokio::test]
async fn a_request_head_trickling_in_is_closed_at_the_header_timeout() {
    // A byte every 50 ms keeps the connection busy (the idle watchdog never
    // fires); the header timeout is a deadline for the whole head.
    let served = serve(limits(SHORT, LONG, LONG)).await;
    let mut stream = TcpStream::connect(served.addr).await.unwrap();
    let opened = Instant::now();
    let (mut read, mut write) = stream.split();
    let trickle = async {
        for byte in b"GET /healthz HTTP/1.1\r\nX-Slow: ".iter().chain([b'a'; 200].iter()) {
            if write.write_all(&[*byte]).await.is_err() {
                return;
            }
            sleep(Duration::from_millis(50)).await;
        }
        panic!("the head was still being read after 10 s");
    };
    let closed = async {
        let mut buf = [0u8; 64];
        match read.read(&mut buf).await {
            Ok(0) => {}
            Ok(n) => panic!("an answer to a cut-off head: {:?}", String::from_utf8_lossy(&buf[..n])),
            Err(err) if err.kind() == ErrorKind::ConnectionReset => {}
            Err(err) => panic!("read failed: {err}"),
        }
    };
    tokio::select! {
        () = trickle => {}
        () = closed => {}
    }
    let took = opened.elapsed();
    assert!(took >= SHORT - Duration::from_millis(50) && took < SHORT * 4, "closed after {took:?}");
}

#[tokio::test]
async fn a_body_shorter_than_its_length_gets_a_408_envelope_and_a_close() {
    let served = serve(limits(LONG, SHORT, LONG)).await;
    for path in ["/api/xtimer/createTimer", "/v1/create_task"] {
        let mut stream = TcpStream::connect(served.addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(br#"{"app": "a""#).await.unwrap();
        let sent = Instant::now();
        let (reply, closed) = read_to_close(&mut stream, Duration::from_secs(3)).await;
        assert_body_timeout(&reply);
        let took = closed - sent;
        assert!(took >= SHORT - Duration::from_millis(50) && took < SHORT * 4, "{path}: closed after {took:?}");
    }
}

#[tokio::test]
async fn a_body_trickling_in_gets_a_408_at_the_body_timeout() {
    let served = serve(limits(LONG, SHORT, LONG)).await;
    let mut stream = TcpStream::connect(served.addr).await.unwrap();
    let body = serde_json::to_string(&cron_timer("a", "slow")).unwrap();
    let head = format!(
        "POST /api/xtimer/createTimer HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let sent = Instant::now();
    let (mut read, mut write) = stream.split();
    let trickle = async {
        for byte in body.as_bytes() {
            if write.write_all(&[*byte]).await.is_err() {
                break;
            }
            sleep(Duration::from_millis(50)).await;
        }
        std::future::pending::<()>().await;
    };
    let mut reply = Vec::new();
    let closed = async {
        let mut buf = [0u8; 4096];
        loop {
            match read.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => reply.extend_from_slice(&buf[..n]),
                Err(err) if err.kind() == ErrorKind::ConnectionReset => return,
                Err(err) => panic!("read failed: {err}"),
            }
        }
    };
    tokio::select! {
        () = trickle => unreachable!(),
        () = closed => {}
        () = sleep(Duration::from_secs(5)) => panic!("still open after 5 s"),
    }
    let took = sent.elapsed();
    assert!(body.len() * 50 > 2_000, "the whole body would take longer than the test allows");
    assert!(took < SHORT * 4, "closed after {took:?}");
    assert_body_timeout(&String::from_utf8_lossy(&reply));
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_and_a_busy_one_is_not() {
    let served = serve(limits(LONG, LONG, SHORT)).await;

    // Busy: a request every 100 ms for three idle timeouts, on one connection.
    let mut busy = TcpStream::connect(served.addr).await.unwrap();
    let started = Instant::now();
    let mut answered = started;
    while started.elapsed() < SHORT * 3 {
        sleep(Duration::from_millis(100)).await;
        busy.write_all(HEALTHZ).await.unwrap();
        assert_eq!(read_response(&mut busy).await.0, 200);
        answered = Instant::now();
    }

    // Then idle: closed about one idle timeout after its last response.
    let (rest, closed) = read_to_close(&mut busy, Duration::from_secs(3)).await;
    assert_eq!(rest, "");
    let took = closed - answered;
    assert!(took >= SHORT - Duration::from_millis(50) && took < SHORT * 4, "closed after {took:?}");

    // A connection that never sends a byte is idle too.
    let mut silent = TcpStream::connect(served.addr).await.unwrap();
    let opened = Instant::now();
    let (rest, closed) = read_to_close(&mut silent, Duration::from_secs(3)).await;
    assert_eq!(rest, "");
    assert!(closed - opened < SHORT * 4, "closed after {:?}", closed - opened);
}

#[tokio::test]
async fn past_the_connection_cap_clients_wait_until_a_connection_closes() {
    let served = serve(ServerConfig { max_connections: 2, ..limits(LONG, LONG, LONG) }).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(served.addr).await.unwrap();
        stream.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        held.push(stream);
    }
    sleep(Duration::from_millis(100)).await;
    // Connected (the listen backlog takes it) but not served.
    let mut third = TcpStream::connect(served.addr).await.unwrap();
    third.write_all(HEALTHZ).await.unwrap();
    let mut buf = [0u8; 64];
    let early = timeout(Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(early.is_err(), "answered past the cap: {early:?}");
    // One held connection closes; the waiting one is served.
    drop(held.pop());
    let (status, _, body) = read_response(&mut third).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn the_rate_limit_still_sees_the_callers_address() {
    let fakes = Fakes {
        security: Some((
            AuthConfig::default(),
            CallbackConfig::default(),
            LimitsConfig { requests_per_second: 1, request_burst: 1, ..LimitsConfig::default() },
        )),
        ..Fakes::default()
    };
    let served = serve_with(limits(LONG, LONG, LONG), fakes).await;
    let mut stream = TcpStream::connect(served.addr).await.unwrap();
    let request = b"GET /xtimer/nope HTTP/1.1\r\nHost: test\r\n\r\n";
    stream.write_all(request).await.unwrap();
    assert_eq!(read_response(&mut stream).await.0, 404);
    stream.write_all(request).await.unwrap();
    let (status, _, body) = read_response(&mut stream).await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("address 127.0.0.1 may send"), "{body}");
}

#[tokio::test]
async fn shutdown_stops_accepting_and_lets_the_request_in_flight_finish() {
    let served = serve(limits(LONG, LONG, LONG)).await;
    let idle = TcpStream::connect(served.addr).await.unwrap();
    let mut in_flight = TcpStream::connect(served.addr).await.unwrap();
    let body = serde_json::to_string(&cron_timer("a", "late")).unwrap();
    let (first, second) = body.split_at(10);
    let head = format!(
        "POST /api/xtimer/createTimer HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{first}",
        body.len()
    );
    in_flight.write_all(head.as_bytes()).await.unwrap();
    sleep(Duration::from_millis(100)).await;

    served.stop.cancel();
    sleep(Duration::from_millis(100)).await;
    assert!(TcpStream::connect(served.addr).await.is_err(), "still accepting after shutdown");
    assert!(!served.task.is_finished(), "returned with a request in flight");
    in_flight.write_all(second.as_bytes()).await.unwrap();
    let (reply, _) = read_to_close(&mut in_flight, Duration::from_secs(3)).await;
    assert!(reply.starts_with("HTTP/1.1 200 "), "{reply}");
    assert!(reply.contains(r#""code":0"#), "{reply}");
    timeout(Duration::from_secs(3), served.task).await.expect("run returns once drained").unwrap();
    drop(idle);
}

#[test]
fn the_defaults_are_at_most_ten_seconds_and_zero_is_refused() {
    let defaults = ServerConfig::default();
    assert_eq!(defaults.header_read_timeout_ms, 10_000);
    assert_eq!(defaults.body_read_timeout_ms, 10_000);
    assert_eq!(defaults.idle_timeout_ms, 10_000);
    assert!(defaults.max_connections > 2_000, "{}", defaults.max_connections);
    let env = ["HEADER_READ_TIMEOUT_MS", "BODY_READ_TIMEOUT_MS", "IDLE_TIMEOUT_MS", "MAX_CONNECTIONS"]
        .map(|field| (format!("XTIMER_SERVER__{field}"), "0".to_string()));
    let err = Config::load(None, &env.into_iter().collect()).unwrap_err().to_string();
    for key in ["header_read_timeout_ms", "body_read_timeout_ms", "idle_timeout_ms", "max_connections"] {
        assert!(err.contains(&format!("server.{key} must be at least 1")), "{key}: {err}");
    }
}

/// With the defaults: 2,000 half-open connections (a head never finished)
/// are all held at once, the API still answers, and every one of them is
/// closed by the default header timeout, within 12 s of being opened.
/// Takes about 10 s.
#[tokio::test]
async fn two_thousand_half_open_connections_do_not_stop_the_api_and_are_closed_by_the_defaults() {
    const HALF_OPEN: usize = 2_000;
    let served = serve(ServerConfig::default()).await;
    let opened = Instant::now();
    let mut held = Vec::with_capacity(HALF_OPEN);
    for _ in 0..HALF_OPEN {
        let mut stream = TcpStream::connect(served.addr).await.expect("connect");
        stream.write_all(b"POST /api/xtimer/createTimer HTTP/1.1\r\nHost: te").await.unwrap();
        held.push(stream);
    }
    let all_open = opened.elapsed();
    assert!(all_open < Duration::from_secs(5), "opening took {all_open:?}");

    // The API answers, on a fresh connection, while all of them are held.
    let asked = Instant::now();
    let mut client = TcpStream::connect(served.addr).await.unwrap();
    client.write_all(HEALTHZ).await.unwrap();
    let (status, _, body) = read_response(&mut client).await;
    assert_eq!(status, 200, "{body}");
    assert!(asked.elapsed() < Duration::from_secs(1), "answered after {:?}", asked.elapsed());
    drop(client);
    for (i, stream) in held.iter().enumerate() {
        let mut buf = [0u8; 1];
        match stream.try_read(&mut buf) {
            Err(err) if err.kind() == ErrorKind::WouldBlock => {}
            other => panic!("half-open connection {i} is not open and waiting: {other:?}"),
        }
    }

    // Each is closed by the default header timeout (10 s), none early.
    let mut closing = JoinSet::new();
    for mut stream in held {
        closing.spawn(async move {
            let deadline = opened + Duration::from_secs(12);
            let (reply, closed) = read_to_close(&mut stream, deadline.saturating_duration_since(Instant::now())).await;
            assert_eq!(reply, "");
            closed
        });
    }
    let mut first_close = None::<Instant>;
    while let Some(closed) = closing.join_next().await {
        let closed = closed.expect("closed within 12 s of being opened");
        first_close = Some(first_close.map_or(closed, |first| first.min(closed)));
    }
    let first_close = first_close.expect("some were held") - opened;
    assert!(first_close >= Duration::from_secs(9), "the first was closed after only {first_close:?}");
}
