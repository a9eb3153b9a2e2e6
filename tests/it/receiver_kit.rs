//! The receiver kit (API 1e) against real signed callbacks from a running
//! node: the `xtimer-receiver` crate's axum extractor, its `v2` signature
//! over the fire's headers, and its dedupe, which records a key only once
//! the work succeeded; and the Python and Node.js snippets of docs/security.md, run
//! with the machine's `python3` and `node`. Signing does not depend on the
//! storage, so these run on the embedded stack only.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::{FromRef, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use xtimer::receiver::Receiver;
use xtimer_core::config::Secret;
use xtimer_core::signature;
use xtimer_receiver::{dedupe_with, MemorySeen, Signed, Verifier, Version};

use crate::helpers::{every_second, now_ms, wait_for, Stack, Storage, TestNode, PATIENCE};

const SECRET: &str = "it-receiver-kit-secret";

/// A node on the embedded stack that signs every callback with [`SECRET`],
/// and the storage that keeps it alive.
async fn signing_node() -> (TestNode, Storage) {
    let storage = Storage::new(Stack::Embedded).await;
    let mut config = storage.config.clone();
    config.callback.signing_secret = Secret::new(SECRET);
    (TestNode::spawn_with(config).await, storage)
}

/// The receiving service of a user: `Signed` and `MemorySeen`.
#[derive(Clone)]
struct Service {
    verifier: Verifier,
    seen: Arc<MemorySeen>,
    /// Every callback the handler took, headers and raw body as received.
    handled: Arc<Mutex<Vec<(HeaderMap, Bytes)>>>,
    /// The work fails this many times for each key before it succeeds.
    fail_first: usize,
    /// The failures so far, per key.
    failures: Arc<Mutex<HashMap<String, usize>>>,
}

impl Service {
    fn new(fail_first: usize) -> Self {
        Self {
            verifier: Verifier::new(SECRET).with_v2_required(true),
            seen: Arc::new(MemorySeen::default()),
            handled: Arc::default(),
            fail_first,
            failures: Arc::default(),
        }
    }
}

impl FromRef<Service> for Verifier {
    fn from_ref(service: &Service) -> Self {
        service.verifier.clone()
    }
}

/// Handles each fire once: the key is recorded only when the work
/// returned Ok, so the retry of a failed attempt does the work.
async fn hook(State(service): State<Service>, headers: HeaderMap, signed: Signed) -> Result<&'static str, Response> {
    assert_eq!(signed.callback.signed_with, Version::V2, "xtimer signs its headers too");
    dedupe_with(&service.seen, &signed, || async {
        let key = &signed.callback.idempotency_key;
        let mut failures = service.failures.lock().unwrap();
        let failed = failures.entry(key.clone()).or_default();
        if *failed < service.fail_first {
            *failed += 1;
            return Err((StatusCode::INTERNAL_SERVER_ERROR, "the work failed").into_response());
        }
        drop(failures);
        assert_eq!(signed.json::<serde_json::Value>().unwrap(), json!({"n": 1}));
        service.handled.lock().unwrap().push((headers, signed.body.clone()));
        Ok("done")
    })
    .await
}

async fn serve(service: Service) -> SocketAddr {
    let app = Router::new().route("/hook", post(hook)).with_state(service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extractor_accepts_real_callbacks_and_refuses_a_repeat_or_a_tampered_one() {
    let (node, _storage) = signing_node().await;
    let service = Service::new(0);
    let addr = serve(service.clone()).await;
    let url = format!("http://{addr}/hook");
    let timer = json!({
        "app": "it", "name": "kit", "cron": "* * * * * *", "status": 2,
        "notifyHTTPParam": {"url": url, "method": "POST", "body": "{\"n\":1}"},
        "retry": {"maxAttempts": 1, "backoffMs": 0}
    });
    let id = node.create_ok(timer).await;

    // The node's callbacks pass the extractor: handled, and recorded as 200s.
    let handled = wait_for("two callbacks handled", || async {
        let handled = service.handled.lock().unwrap().clone();
        (handled.len() >= 2).then_some(handled)
    })
    .await;
    let fires = wait_for("the handled fires are recorded", || async {
        let fires = node.fires(id, "it").await;
        let done: Vec<_> = fires.into_iter().filter(|f| f["status"].as_i64() > Some(1)).collect();
        (done.len() >= 2).then_some(done)
    })
    .await;
    for fire in &fires {
        assert_eq!(fire["status"], 2, "{fire}");
        assert!(fire["output"].as_str().unwrap().starts_with("HTTP 200"), "{fire}");
    }
    node.act("disableTimer", id, "it").await;

    // The first callback again, verbatim: a repeat, 409.
    let (headers, body) = handled[0].clone();
    let key = headers["idempotency-key"].to_str().unwrap().to_owned();
    assert_eq!(key, format!("{id}_{}", headers["x-xtimer-scheduled-time"].to_str().unwrap()));
    let mut resend = headers.clone();
    for hop in ["host", "content-length", "connection"] {
        resend.remove(hop);
    }
    let send = |headers: &HeaderMap, body: Vec<u8>| node.http.post(&url).headers(headers.clone()).body(body).send();
    let reply = send(&resend, body.to_vec()).await.unwrap();
    assert_eq!(reply.status(), StatusCode::CONFLICT);
    assert_eq!(reply.text().await.unwrap(), format!("already done: {key}\n"));

    // One byte of the body changed: the signature no longer matches, 401.
    let mut tampered = body.to_vec();
    tampered[5] = b'2';
    assert_eq!(tampered, b"{\"n\":2}");
    let reply = send(&resend, tampered).await.unwrap();
    assert_eq!(reply.status(), StatusCode::UNAUTHORIZED);
    let text = reply.text().await.unwrap();
    assert!(text.contains("no v2 signature matches the body and headers"), "{text}");

    // A signed header changed (v2 covers them): 401, not a new fire to do.
    for (name, value) in [("idempotency-key", format!("{id}_1")), ("x-xtimer-attempt", "2".to_owned())] {
        let mut changed = resend.clone();
        changed.insert(name, HeaderValue::from_str(&value).unwrap());
        let reply = send(&changed, body.to_vec()).await.unwrap();
        assert_eq!(reply.status(), StatusCode::UNAUTHORIZED, "{name}");
        let text = reply.text().await.unwrap();
        assert!(text.contains("no v2 signature matches the body and headers"), "{name}: {text}");
    }
    // Its v2 stripped, so that v1 alone would pass: this verifier requires v2.
    let mut stripped = resend.clone();
    let signature = stripped["x-xtimer-signature"].to_str().unwrap();
    let v1_only = signature.split(",v2=").next().unwrap().to_owned();
    assert_ne!(v1_only, signature, "xtimer sends v2: {signature}");
    stripped.insert("x-xtimer-signature", HeaderValue::from_str(&v1_only).unwrap());
    stripped.insert("idempotency-key", HeaderValue::from_str(&format!("{id}_1")).unwrap());
    let reply = send(&stripped, body.to_vec()).await.unwrap();
    assert_eq!(reply.status(), StatusCode::UNAUTHORIZED);
    assert!(reply.text().await.unwrap().contains("v2 is required"));

    // No signature at all: 401 as well; nothing of it was handled.
    resend.remove("x-xtimer-signature");
    let reply = send(&resend, body.to_vec()).await.unwrap();
    assert_eq!(reply.status(), StatusCode::UNAUTHORIZED);
    let handled = service.handled.lock().unwrap().clone();
    let mut keys: Vec<_> = handled.iter().map(|(h, _)| h["idempotency-key"].to_str().unwrap().to_owned()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), handled.len(), "each fire handled once: {keys:?}");
    node.stop().await;
}

/// The old `dedupe` recorded a key before the work: the retry of an
/// attempt whose work failed was answered 409, which xtimer records as
/// succeeded, and the work never happened. Now the retry does it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_is_done_by_its_retry_not_answered_409() {
    let (node, _storage) = signing_node().await;
    let service = Service::new(1);
    let addr = serve(service.clone()).await;
    let id = node
        .create_ok(json!({
            "app": "it", "name": "fails-once", "runAt": now_ms() + 1_000, "status": 2,
            "notifyHTTPParam": {"url": format!("http://{addr}/hook"), "method": "POST", "body": "{\"n\":1}"},
            "retry": {"maxAttempts": 2, "backoffMs": 100}
        }))
        .await;
    let fire = wait_for("the fire's outcome", || async {
        node.fires(id, "it").await.into_iter().find(|f| f["status"].as_i64() > Some(1))
    })
    .await;
    assert_eq!(fire["status"], 2, "{fire}");
    assert_eq!(fire["attempt"], 2, "{fire}");
    assert!(fire["output"].as_str().unwrap().starts_with("HTTP 200"), "done by the retry, not a 409: {fire}");
    let handled = service.handled.lock().unwrap().clone();
    assert_eq!(handled.len(), 1, "the work was done once");
    let (headers, body) = &handled[0];
    assert_eq!(headers["x-xtimer-attempt"], "2");
    let callback = xtimer_receiver::verify(headers, body, SECRET.as_bytes(), SystemTime::now()).unwrap();
    assert_eq!((callback.attempt, callback.signed_with), (Some(2), Version::V2));
    assert_eq!(service.failures.lock().unwrap()[&callback.idempotency_key], 1);
    node.stop().await;
}

/// A fenced code block of the security page's signed-callbacks section
/// (`docs/security.md`): the one in `lang` holding the `xtimer: verify`
/// marker line.
fn readme_snippet(lang: &str) -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/security.md")).unwrap();
    let fence = format!("```{lang}\n");
    readme
        .split(&fence)
        .skip(1)
        .filter_map(|rest| rest.split_once("\n```").map(|(code, _)| code))
        .find(|code| code.lines().next().is_some_and(|first| first.contains("xtimer: verify")))
        .unwrap_or_else(|| panic!("docs/security.md has no ```{lang} block starting with an `xtimer: verify` line"))
        .to_owned()
        + "\n"
}

/// Runs `program script` with the secret and the request's headers (a
/// JSON object) in the environment and `body` on stdin; its exit status
/// and what it printed.
async fn run_snippet(
    program: &str,
    script: &Path,
    secret: &str,
    headers: &HeaderMap,
    require_v2: bool,
    body: &[u8],
) -> (bool, String) {
    let headers: serde_json::Map<String, serde_json::Value> =
        headers.iter().map(|(name, value)| (name.as_str().to_owned(), json!(value.to_str().unwrap()))).collect();
    let mut child = tokio::process::Command::new(program)
        .arg(script)
        .env("XTIMER_SECRET", secret)
        .env("XTIMER_HEADERS", serde_json::Value::Object(headers).to_string())
        .env("XTIMER_REQUIRE_V2", if require_v2 { "1" } else { "" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("`{program}` could not start ({e}); .ci/run installs it"));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(body).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said.trim().to_owned())
}

/// Panics with a clear message when `program` is not installed.
fn require(program: &str, what: &str) {
    let found = std::process::Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(
        found,
        "`{program}` ({what}) is not installed: docs/security.md's snippet is tested with it (.ci/run installs it)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_snippets_in_python_and_node_verify_real_callbacks() {
    require("python3", "Python 3");
    require("node", "Node.js");
    let dir = tempfile::tempdir().unwrap();
    let python = dir.path().join("verify.py");
    let js = dir.path().join("verify.js");
    std::fs::write(&python, readme_snippet("python")).unwrap();
    std::fs::write(&js, readme_snippet("js")).unwrap();

    let (node, _storage) = signing_node().await;
    let rx = Receiver::start(true).await.unwrap();
    let id = node.create_ok(every_second("snippets", &rx, json!({}))).await;
    assert!(rx.wait_until(PATIENCE, |hits| !hits.is_empty()).await, "a callback arrives");
    node.act("disableTimer", id, "it").await;
    let hit = rx.hits().remove(0);
    let headers = hit.headers.as_ref().unwrap();
    let header = headers["x-xtimer-signature"].to_str().unwrap().to_owned();
    let body = hit.body.to_vec();
    assert_eq!(body, b"{\"n\":1}");

    // The kit reads the same callback.
    let callback = xtimer_receiver::verify(headers, &body, SECRET.as_bytes(), SystemTime::now()).unwrap();
    assert_eq!((callback.timer_id, callback.idempotency_key.as_str()), (id, hit.key.as_str()));
    assert_eq!(callback.scheduled_time_ms, hit.run_ms);
    assert!((callback.signed_at - now_ms() / 1000).abs() <= 30, "{callback:?}");

    assert_eq!((callback.attempt, callback.signed_with), (Some(1), Version::V2));

    let t = callback.signed_at;
    let (v1, v2) = header.split_once(",v2=").expect("xtimer sends v1 and v2");
    let with = |name: &str, value: &str| {
        let mut changed = headers.clone();
        changed.insert(axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        changed
    };
    let old = signature::header_value(SECRET.as_bytes(), now_ms() / 1000 - 600, &body);
    let rotating = format!("{v1},v2={},v2={v2}", "0".repeat(64));
    let mut tampered = body.clone();
    tampered[5] = b'2';
    for (program, script) in [("python3", &python), ("node", &js)] {
        let run = |secret: &'static str, headers: HeaderMap, require_v2: bool, body: Vec<u8>| async move {
            run_snippet(program, script, secret, &headers, require_v2, &body).await
        };
        let (ok, said) = run(SECRET, headers.clone(), true, body.clone()).await;
        assert!(ok && said == "ok (v2)", "{program}: a real callback: {said}");
        let (ok, said) = run(SECRET, with("x-xtimer-signature", &rotating), true, body.clone()).await;
        assert!(ok, "{program}: a real callback among other v2 entries: {said}");
        let (ok, said) = run(SECRET, headers.clone(), false, tampered.clone()).await;
        assert!(!ok && said.contains("no v2 signature matches"), "{program}: a tampered body: {said}");
        for (name, value) in [("idempotency-key", format!("{id}_1")), ("x-xtimer-attempt", "2".into())] {
            let (ok, said) = run(SECRET, with(name, &value), false, body.clone()).await;
            assert!(!ok && said.contains("no v2 signature matches"), "{program}: {name} changed: {said}");
        }
        let (ok, said) = run(SECRET, with("x-xtimer-replay", "1"), false, body.clone()).await;
        assert!(!ok && said.contains("no v2 signature matches"), "{program}: a replay header added: {said}");
        let (ok, said) = run("another-secret", headers.clone(), false, body.clone()).await;
        assert!(!ok && said.contains("no v2 signature matches"), "{program}: another secret: {said}");
        // v1 alone (an older xtimer): checked when v2 is not required, refused when it is.
        let (ok, said) = run(SECRET, with("x-xtimer-signature", v1), false, body.clone()).await;
        assert!(ok && said == "ok (v1)", "{program}: v1 alone: {said}");
        let (ok, said) = run(SECRET, with("x-xtimer-signature", v1), false, tampered.clone()).await;
        assert!(!ok && said.contains("no v1 signature matches"), "{program}: v1 alone, a tampered body: {said}");
        let (ok, said) = run(SECRET, with("x-xtimer-signature", v1), true, body.clone()).await;
        assert!(!ok && said.contains("v2 is required"), "{program}: v1 alone, v2 required: {said}");
        let (ok, said) = run(SECRET, with("x-xtimer-signature", &old), false, body.clone()).await;
        assert!(!ok && said.contains("too old"), "{program}: signed 10 minutes ago: {said}");
        let (ok, said) = run(SECRET, with("x-xtimer-signature", "garbage"), false, body.clone()).await;
        assert!(!ok && said.contains("malformed"), "{program}: a malformed header: {said}");
    }
    // A receiver that checks v1 only, as the README showed before v2, still takes it.
    assert_eq!(signature::verify(SECRET.as_bytes(), &header, &body, signature::DEFAULT_TOLERANCE, t), Ok(()));
    node.stop().await;
}
