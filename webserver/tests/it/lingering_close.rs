//! Bodies over `server.max_body_bytes` against the real accept loop, with
//! the default settings: a client that sends its whole body before it
//! reads sends it all without a write failing (the server half-closes and
//! discards what still comes in, instead of resetting the connection) and
//! then reads the 413 that names the setting (or the 408 of a body that
//! came too late); a client that never stops
//! sending, or never closes, is still closed soon after the answer.

use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::{sleep, timeout, Instant};
use xtimer_core::config::ServerConfig;

use crate::slow_clients::{assert_body_timeout, read_response, read_to_close, serve, HEALTHZ};

/// The body a client sends: 20 MiB, far over the 64 KiB default limit.
const BODY_BYTES: usize = 20 << 20;
/// The size of each write of the body.
const CHUNK_BYTES: usize = 64 << 10;
/// Connections per test: a reset loses the answer only some of the time.
const CONNECTIONS: usize = 20;

/// The head of a create call whose body is framed by `framing`.
fn create_head(framing: &str) -> String {
    format!("POST /api/xtimer/createTimer HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n{framing}\r\n")
}

/// Writes every part, as a client that does not read before it has sent
/// its whole request does: a failed write does not stop it. The first
/// error, if any (where most clients would have given up with it, not
/// having read the answer).
async fn send_ignoring_errors<'a>(
    stream: &mut TcpStream,
    parts: impl IntoIterator<Item = &'a [u8]>,
) -> Option<std::io::Error> {
    let mut first_error = None;
    for part in parts {
        if let Err(err) = stream.write_all(part).await {
            first_error.get_or_insert(err);
        }
    }
    first_error
}

/// Asserts `reply` (a whole response as read to its close) is the 413
/// envelope naming `server.max_body_bytes`, with `Connection: close`.
fn assert_too_large(reply: &str) {
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no response: {reply:?}"));
    assert!(head.starts_with("HTTP/1.1 413 "), "{reply}");
    assert!(head.to_ascii_lowercase().contains("\r\nconnection: close"), "{reply}");
    let body: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {reply}"));
    assert_eq!(body["code"], 413, "{body}");
    let msg = body["msg"].as_str().expect("msg");
    assert!(msg.contains("65536 bytes (server.max_body_bytes)"), "{msg}");
}

#[tokio::test]
async fn a_client_that_sends_a_whole_oversized_body_before_reading_gets_the_413() {
    let served = serve(ServerConfig::default()).await;
    let head = create_head(&format!("Content-Length: {BODY_BYTES}\r\n"));
    let body = vec![b' '; BODY_BYTES];
    for i in 0..CONNECTIONS {
        let mut stream = TcpStream::connect(served.addr).await.expect("connect");
        let parts = std::iter::once(head.as_bytes()).chain(body.chunks(CHUNK_BYTES));
        let failed = send_ignoring_errors(&mut stream, parts).await;
        let (reply, _) = read_to_close(&mut stream, Duration::from_secs(5)).await;
        assert!(!reply.is_empty(), "connection {i}: reset before its answer was read");
        assert_too_large(&reply);
        assert!(failed.is_none(), "connection {i}: the body could not be sent: {failed:?}");
    }
}

#[tokio::test]
async fn a_client_that_sends_a_whole_oversized_chunked_body_before_reading_gets_the_413() {
    let served = serve(ServerConfig::default()).await;
    let head = create_head("Transfer-Encoding: chunked\r\n");
    let chunk = [format!("{CHUNK_BYTES:x}\r\n").into_bytes(), vec![b' '; CHUNK_BYTES], b"\r\n".to_vec()].concat();
    for i in 0..CONNECTIONS {
        let mut stream = TcpStream::connect(served.addr).await.expect("connect");
        let chunks = std::iter::repeat_n(chunk.as_slice(), BODY_BYTES / CHUNK_BYTES);
        let parts = std::iter::once(head.as_bytes()).chain(chunks).chain([b"0\r\n\r\n".as_slice()]);
        let failed = send_ignoring_errors(&mut stream, parts).await;
        let (reply, _) = read_to_close(&mut stream, Duration::from_secs(5)).await;
        assert!(!reply.is_empty(), "connection {i}: reset before its answer was read");
        assert_too_large(&reply);
        assert!(failed.is_none(), "connection {i}: the body could not be sent: {failed:?}");
    }
}

#[tokio::test]
async fn a_client_that_sends_the_rest_of_its_body_after_a_408_can_send_it_and_read_the_408() {
    let config = ServerConfig { body_read_timeout_ms: 300, ..ServerConfig::default() };
    let served = serve(config).await;
    let head = create_head(&format!("Content-Length: {}\r\n", BODY_BYTES + 1));
    let body = vec![b' '; BODY_BYTES];
    let mut stream = TcpStream::connect(served.addr).await.expect("connect");
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(b"{").await.expect("write");
    sleep(Duration::from_millis(500)).await;
    let failed = send_ignoring_errors(&mut stream, body.chunks(CHUNK_BYTES)).await;
    let (reply, _) = read_to_close(&mut stream, Duration::from_secs(5)).await;
    assert_body_timeout(&reply);
    assert!(failed.is_none(), "the body could not be sent: {failed:?}");
}

#[tokio::test]
async fn a_client_that_never_stops_sending_is_closed_soon_after_its_413() {
    let served = serve(ServerConfig::default()).await;
    let stream = TcpStream::connect(served.addr).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let started = Instant::now();
    let sender = tokio::spawn(async move {
        let head = create_head(&format!("Content-Length: {}\r\n", u64::MAX >> 1));
        let chunk = vec![b' '; CHUNK_BYTES];
        let mut sent = write.write_all(head.as_bytes()).await;
        while sent.is_ok() {
            sent = write.write_all(&chunk).await;
        }
        Instant::now()
    });
    let (reply, _) = read_to_close(&mut read, Duration::from_secs(10)).await;
    assert_too_large(&reply);
    let refused = timeout(Duration::from_secs(10), sender).await.expect("the server closes").expect("sender");
    let took = refused - started;
    assert!(took < Duration::from_secs(4), "the server took input for {took:?}");
}

/// A client that reads its 413 but neither sends nor closes holds its
/// connection, and its place under `server.max_connections`, until the
/// linger's idle bound (1 s) ends it.
#[tokio::test]
async fn a_silent_client_after_its_413_holds_its_connection_about_a_second() {
    let served = serve(ServerConfig { max_connections: 1, ..ServerConfig::default() }).await;
    let mut silent = TcpStream::connect(served.addr).await.expect("connect");
    let head = create_head(&format!("Content-Length: {BODY_BYTES}\r\n"));
    silent.write_all(head.as_bytes()).await.expect("write head");
    silent.write_all(&vec![b' '; 4 * CHUNK_BYTES]).await.expect("write past the limit");
    let sent = Instant::now();
    let (reply, _) = read_to_close(&mut silent, Duration::from_secs(5)).await;
    assert_too_large(&reply);

    let mut next = TcpStream::connect(served.addr).await.expect("connect");
    next.write_all(HEALTHZ).await.expect("write");
    let (status, _, body) = read_response(&mut next).await;
    assert_eq!(status, 200, "{body}");
    let took = sent.elapsed();
    assert!(took > Duration::from_millis(700), "the lingering connection let go after only {took:?}");
    assert!(took < Duration::from_millis(2_500), "the lingering connection let go after {took:?}");
    drop(silent);
}
