//! Plain-HTTP/1.1 callbacks against scripted receivers on loopback: raw
//! TCP servers that answer each request with chosen bytes, then keep the
//! connection, close it, or reset it. They count connections and requests,
//! so a request sent twice shows.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use xtimer_core::fire::FireKey;
use xtimer_core::timer::HttpNotify;
use xtimer_executor::callback::{self, Answer, Client, Delivery};

/// What the receiver does with its n-th request (0-based, over all connections).
#[derive(Clone)]
enum Reply {
    /// Writes these bytes and keeps the connection.
    Keep(&'static str),
    /// Writes these bytes, then closes the connection.
    Close(&'static str),
    /// Writes nothing and resets the connection.
    Reset,
    /// Writes nothing and waits.
    Hang,
}

struct Receiver {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
}

impl Receiver {
    /// A receiver answering request `n` with `script(n)`.
    async fn start(script: impl Fn(usize) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let script = Arc::new(script);
        let (seen, count) = (requests.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, seen.clone(), script.clone()));
            }
        });
        Self { addr, requests, connections }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

async fn serve(
    mut stream: TcpStream,
    seen: Arc<Mutex<Vec<String>>>,
    script: Arc<impl Fn(usize) -> Reply + Send + Sync + 'static>,
) {
    let mut buf = Vec::new();
    loop {
        // One request: its head, then Content-Length bytes of body.
        let end = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map_or(0, |n| n.trim().parse::<usize>().unwrap());
        while buf.len() < end + length {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let request = String::from_utf8_lossy(&buf[..end + length]).to_string();
        buf.drain(..end + length);
        let n = {
            let mut seen = seen.lock().unwrap();
            seen.push(request);
            seen.len() - 1
        };
        match script(n) {
            Reply::Keep(bytes) => {
                if stream.write_all(bytes.as_bytes()).await.is_err() {
                    return;
                }
            }
            Reply::Close(bytes) => {
                let _ = stream.write_all(bytes.as_bytes()).await;
                return;
            }
            Reply::Reset => {
                let _ = stream.set_zero_linger();
                return;
            }
            Reply::Hang => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                return;
            }
        }
    }
}

const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

fn notify(url: String) -> HttpNotify {
    HttpNotify {
        url,
        method: "POST".into(),
        headers: BTreeMap::from([("x-team".to_string(), "ops".to_string())]),
        body: Some("{\"a\":1}".into()),
        timeout_ms: Some(2_000),
        template: false,
        flow_key: None,
    }
}

async fn call(client: &Client, notify: &HttpNotify, run_ms: i64) -> Answer {
    callback::call(client, notify, FireKey { timer_id: 7, run_ms }, 64).await
}

fn client() -> Client {
    callback::client(5_000, 4).unwrap()
}

fn ok() -> Answer {
    Answer::new(Delivery::Delivered, "HTTP 200: ok".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_to_one_host_share_a_kept_alive_connection() {
    let rx = Receiver::start(|_| Reply::Keep(OK)).await;
    let client = client();
    let n = notify(rx.url("/hook?x=1"));
    for run_ms in [1_000, 2_000, 3_000] {
        assert_eq!(call(&client, &n, run_ms).await, ok());
    }
    assert_eq!(rx.connections(), 1, "one connection carried all three");
    assert_eq!(client.idle_http1_connections(), 1);

    let requests = rx.requests();
    assert_eq!(requests.len(), 3);
    let first = &requests[0];
    assert!(first.starts_with("POST /hook?x=1 HTTP/1.1\r\n"), "{first}");
    for header in [
        format!("host: {}\r\n", rx.addr),
        "x-team: ops\r\n".into(),
        "content-type: application/json\r\n".into(),
        "content-length: 7\r\n".into(),
        "x-xtimer-timer-id: 7\r\n".into(),
        "x-xtimer-run-time: 1000\r\n".into(),
        "idempotency-key: 7_1000\r\n".into(),
    ] {
        assert!(first.contains(&header), "{header:?} missing from {first}");
    }
    assert!(first.ends_with("\r\n\r\n{\"a\":1}"), "{first}");
    assert!(requests[2].contains("idempotency-key: 7_3000\r\n"), "{}", requests[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_receiver_closed_while_idle_is_not_reused() {
    // Answers without `Connection: close`, then closes: the client learns
    // of it only from the end-of-file waiting on the idle connection.
    let rx = Receiver::start(|_| Reply::Close(OK)).await;
    let client = client();
    let n = notify(rx.url("/hook"));
    for run_ms in [1_000, 2_000, 3_000] {
        assert_eq!(call(&client, &n, run_ms).await, ok());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(rx.requests().len(), 3, "each fire sent once");
    assert_eq!(rx.connections(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_saying_close_closes_the_connection() {
    let rx =
        Receiver::start(|_| Reply::Keep("HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 2\r\n\r\nok")).await;
    let client = client();
    let n = notify(rx.url("/hook"));
    assert_eq!(call(&client, &n, 1_000).await, ok());
    assert_eq!(client.idle_http1_connections(), 0);
    assert_eq!(call(&client, &n, 2_000).await, ok());
    assert_eq!(rx.connections(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_receiver_took_and_dropped_is_never_sent_again() {
    // The second request arrives on the kept connection, which is then
    // reset: the receiver has it, so the client must not send it again.
    let rx = Receiver::start(|n| if n == 1 { Reply::Reset } else { Reply::Keep(OK) }).await;
    let client = client();
    let n = notify(rx.url("/hook"));
    assert_eq!(call(&client, &n, 1_000).await, ok());
    let failed = call(&client, &n, 2_000).await;
    assert_eq!(failed.delivery, Delivery::Unanswered, "{failed:?}");
    assert_eq!(rx.requests().len(), 2, "sent once, not retried on a new connection");
    assert_eq!(rx.connections(), 1);

    // A new connection takes the next fire.
    assert_eq!(call(&client, &n, 3_000).await, ok());
    assert_eq!(rx.requests().len(), 3);
    assert_eq!(rx.connections(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_closing_without_an_answer_fails_the_callback_once() {
    let rx = Receiver::start(|_| Reply::Close("")).await;
    let client = client();
    let failed = call(&client, &notify(rx.url("/hook")), 1_000).await;
    assert_eq!(failed.delivery, Delivery::Unanswered, "{failed:?}");
    assert!(failed.output.contains("closed the connection"), "{}", failed.output);
    assert_eq!(rx.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_never_answers_times_out() {
    let rx = Receiver::start(|_| Reply::Hang).await;
    let client = client();
    let mut n = notify(rx.url("/hook"));
    n.timeout_ms = Some(200);
    let failed = call(&client, &n, 1_000).await;
    assert_eq!(failed, Answer::new(Delivery::Unanswered, "callback timed out after 200 ms".into()));
    assert_eq!(client.idle_http1_connections(), 0, "a timed-out connection is closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_framed_every_way_read_alike() {
    const ANSWERS: [&str; 6] = [
        // chunked, with an extension and a trailer
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n",
        // an interim answer before the final one
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 4\r\n\r\nmade",
        "HTTP/1.1 204 No Content\r\n\r\n",
        // a body longer than the output kept: cut, the connection still reused
        "HTTP/1.1 500 Oops\r\ncontent-length: 100\r\n\r\n0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
        "HTTP/1.1 503 Busy\r\nRetry-After: 7\r\ncontent-length: 0\r\n\r\n",
        // no length: the body runs to the close
        "HTTP/1.0 200 OK\r\n\r\nto the end",
    ];
    let rx = Receiver::start(|n| if n < 5 { Reply::Keep(ANSWERS[n]) } else { Reply::Close(ANSWERS[n]) }).await;
    let client = client();
    let n = notify(rx.url("/hook"));
    let answers = [
        (Delivery::Delivered, "HTTP 200: abcde".to_string()),
        (Delivery::Delivered, "HTTP 201: made".into()),
        (Delivery::Delivered, "HTTP 204".into()),
        (Delivery::Rejected { status: 500, retry_after_ms: None }, format!("HTTP 500: {}", "0123456789".repeat(10))),
        (Delivery::Rejected { status: 503, retry_after_ms: Some(7_000) }, "HTTP 503".into()),
        (Delivery::Delivered, "HTTP 200: to the end".into()),
    ];
    for (i, (delivery, output)) in answers.into_iter().enumerate() {
        let got = call(&client, &n, i as i64).await;
        assert_eq!(got, Answer::new(delivery, output[..output.len().min(64)].to_string()), "answer {i}");
    }
    assert_eq!(rx.requests().len(), 6);
    assert_eq!(rx.connections(), 1, "every answer but the last left the connection reusable");
    assert_eq!(client.idle_http1_connections(), 0, "the last answer ran to the close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_request_reads_no_body_and_a_get_sends_no_length() {
    // The HEAD answer names the length its GET would have, and sends no body.
    let rx = Receiver::start(|n| {
        Reply::Keep(if n == 0 {
            "HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n"
        } else {
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
        })
    })
    .await;
    let client = client();
    let mut n = notify(rx.url("/h"));
    n.method = "HEAD".into();
    n.body = None;
    assert_eq!(call(&client, &n, 1).await, Answer::new(Delivery::Delivered, "HTTP 200".into()));
    n.method = "GET".into();
    assert_eq!(call(&client, &n, 2).await, Answer::new(Delivery::Delivered, "HTTP 200".into()));
    let requests = rx.requests();
    assert!(requests[1].starts_with("GET /h HTTP/1.1\r\n"), "{}", requests[1]);
    assert!(!requests[1].contains("content-length"), "{}", requests[1]);
    assert_eq!(rx.connections(), 1);
}
