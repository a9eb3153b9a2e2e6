//! A node's HTTP server under slow clients: its `server.*` timeouts apply
//! on real sockets (a head never finished is closed; a body shorter than
//! its `Content-Length` gets a 408 envelope, then the close), and the API
//! keeps answering meanwhile. The webserver's own tests cover each limit
//! in detail.

use std::io::ErrorKind;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout, Instant};

use crate::helpers::{Stack, Storage, TestNode};

/// Reads until the node closes the connection; what it sent. Panics if the
/// connection is still open after `within`.
async fn read_to_close(stream: &mut TcpStream, within: Duration) -> String {
    let mut seen = Vec::new();
    let closed = timeout(within, async {
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
    assert!(closed.is_ok(), "still open after {within:?}; read so far: {text:?}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_closes_slow_clients_under_its_server_timeouts() {
    let storage = Storage::new(Stack::Embedded).await;
    let mut config = storage.config.clone();
    config.server.header_read_timeout_ms = 300;
    config.server.body_read_timeout_ms = 300;
    config.server.idle_timeout_ms = 5_000;
    let node = TestNode::spawn_with(config).await;
    let addr = node.node.addr;

    let mut head = TcpStream::connect(addr).await.unwrap();
    head.write_all(b"GET /healthz HTTP/1.1\r\nHost: it\r\n").await.unwrap();
    let mut body = TcpStream::connect(addr).await.unwrap();
    let request = "POST /v1/create_task HTTP/1.1\r\nHost: it\r\nContent-Type: application/json\r\nContent-Length: 80\r\n\r\n{\"taskData\":";
    body.write_all(request.as_bytes()).await.unwrap();
    let sent = Instant::now();

    // Both are held; the API answers anyway.
    let health: Value = node.http.get(format!("{}/healthz", node.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["code"], 0, "{health}");

    assert_eq!(read_to_close(&mut head, Duration::from_secs(3)).await, "", "a cut-off head gets no answer");
    let reply = read_to_close(&mut body, Duration::from_secs(3)).await;
    assert!(sent.elapsed() < Duration::from_secs(2), "closed after {:?}", sent.elapsed());
    let (status_and_headers, json) = reply.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no answer: {reply:?}"));
    assert!(status_and_headers.starts_with("HTTP/1.1 408 "), "{reply}");
    assert!(status_and_headers.to_ascii_lowercase().contains("\r\nconnection: close"), "{reply}");
    let json: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {reply}"));
    assert_eq!(json["code"], 408, "{json}");
    assert!(json["msg"].as_str().unwrap().contains("server.body_read_timeout_ms"), "{json}");
    assert!(json["result"].is_null(), "{json}");
    node.stop().await;
}
