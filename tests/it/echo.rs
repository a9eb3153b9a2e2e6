//! `xtimer echo`, the receiver of the README's walkthrough, as a process.

use std::process::{Command, Stdio};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_answers_200_and_prints_each_request_without_colour_codes() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_xtimer"))
        .args(["echo", "--listen", &format!("127.0.0.1:{port}")])
        .env("XTIMER_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = crate::helpers::stdout_lines(&mut child);
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/hook");
    let mut answered = None;
    for _ in 0..100 {
        let sent = http
            .post(&url)
            .header("idempotency-key", "3_1000")
            .header("x-xtimer-run-time", "1000")
            .body(r#"{"hello":1}"#)
            .send()
            .await;
        if let Ok(resp) = sent {
            answered = Some((resp.status().as_u16(), resp.text().await.unwrap()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(answered, Some((200, "ok".to_string())));
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        let done = line.contains("fire 3_1000");
        lines.push(line);
        if done {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let printed = lines.join("\n");
    assert!(
        printed.contains(r#"POST /hook fire 3_1000 ("#) && printed.contains(r#"body "{\"hello\":1}""#),
        "{printed}"
    );
    assert!(printed.contains("xtimer echo is listening"), "{printed}");
    assert!(!printed.contains('\u{1b}'), "no ANSI codes when stdout is not a terminal: {printed:?}");
}
