//! Sending the hostile requests and judging each reply.

use super::*;

/// What a reply must look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expect {
    /// The timer API's envelope: a 4xx, `code` = the status, a non-empty `msg`, `result: null`.
    Envelope,
    /// The asyncflow shape: 200 (401/403 for auth) with a non-zero asyncflow `code` and a non-empty `msg`.
    Asyncflow,
}

/// One hostile request.
pub(super) struct Hostile {
    pub(super) category: &'static str,
    pub(super) expect: Expect,
    pub(super) method: Method,
    /// Path and query, encoded.
    pub(super) path: String,
    /// `Authorization` values, in order (none, one, or several).
    pub(super) auth: Vec<HeaderValue>,
    pub(super) content_type: Option<&'static str>,
    pub(super) body: Option<Vec<u8>>,
}

impl Hostile {
    pub(super) fn new(expect: Expect, method: Method, path: impl Into<String>) -> Self {
        Self { category: "", expect, method, path: path.into(), auth: Vec::new(), content_type: None, body: None }
    }

    /// A timer API call.
    pub(super) fn timer(method: Method, path: impl Into<String>) -> Self {
        Self::new(Expect::Envelope, method, path)
    }

    /// A `/v1` call.
    pub(super) fn v1(method: Method, path: impl Into<String>) -> Self {
        Self::new(Expect::Asyncflow, method, path)
    }

    pub(super) fn bearer(mut self, token: &str) -> Self {
        self.auth.push(HeaderValue::from_str(&format!("Bearer {token}")).expect("token is a header value"));
        self
    }

    pub(super) fn authorization(mut self, value: HeaderValue) -> Self {
        self.auth.push(value);
        self
    }

    /// A body sent as `application/json`.
    pub(super) fn json(self, body: impl Into<Vec<u8>>) -> Self {
        self.raw(Some("application/json"), body)
    }

    pub(super) fn raw(mut self, content_type: Option<&'static str>, body: impl Into<Vec<u8>>) -> Self {
        self.content_type = content_type;
        self.body = Some(body.into());
        self
    }

    pub(super) fn describe(&self) -> String {
        let path: String = self.path.chars().take(300).collect();
        let auth: Vec<String> =
            self.auth.iter().map(|v| String::from_utf8_lossy(v.as_bytes()).chars().take(60).collect()).collect();
        let body = self.body.as_ref().map(|b| {
            let text: String = String::from_utf8_lossy(b).chars().take(300).collect();
            format!(" body ({} bytes, {:?}): {text}", b.len(), self.content_type)
        });
        format!("[{}] {} {path} auth={auth:?}{}", self.category, self.method, body.unwrap_or_default())
    }
}

/// What became of one request.
pub(super) struct Outcome {
    pub(super) category: &'static str,
    pub(super) status: Option<u16>,
    pub(super) failure: Option<String>,
}

pub(super) async fn send_all(node: &TestNode, requests: Vec<Hostile>) -> Vec<Outcome> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let mut lanes: Vec<Vec<Hostile>> = (0..IN_FLIGHT).map(|_| Vec::new()).collect();
    for (i, r) in requests.into_iter().enumerate() {
        lanes[i % IN_FLIGHT].push(r);
    }
    let mut workers = tokio::task::JoinSet::new();
    for lane in lanes {
        let (http, base) = (http.clone(), node.base.clone());
        workers.spawn(async move {
            let mut out = Vec::with_capacity(lane.len());
            for h in lane {
                out.push(send(&http, &base, &h).await);
            }
            out
        });
    }
    let mut outcomes = Vec::new();
    while let Some(lane) = workers.join_next().await {
        outcomes.extend(lane.expect("a sender lane"));
    }
    outcomes
}

pub(super) async fn send(http: &reqwest::Client, base: &str, h: &Hostile) -> Outcome {
    let mut req = http.request(h.method.clone(), format!("{base}{}", h.path));
    for value in &h.auth {
        req = req.header(AUTHORIZATION, value.clone());
    }
    if let Some(ct) = h.content_type {
        req = req.header(CONTENT_TYPE, ct);
    }
    if let Some(body) = &h.body {
        req = req.body(body.clone());
    }
    let (status, failure) = match req.send().await {
        Err(err) => (None, Some(format!("no answer ({err:?}): {}", h.describe()))),
        Ok(resp) => {
            let status = resp.status();
            let closes = resp.headers().get(CONNECTION).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
            match resp.bytes().await {
                Err(err) => {
                    (Some(status.as_u16()), Some(format!("{status}, body unreadable ({err}): {}", h.describe())))
                }
                Ok(body) => {
                    let verdict = judge(h.expect, status, closes, &body);
                    (Some(status.as_u16()), verdict.err().map(|why| format!("{why}: {}", h.describe())))
                }
            }
        }
    };
    Outcome { category: h.category, status, failure }
}

/// Whether a reply is the clear error `expect` asks for (`closes`: it
/// has `Connection: close`).
pub(super) fn judge(expect: Expect, status: StatusCode, closes: bool, body: &[u8]) -> Result<(), String> {
    let text = || String::from_utf8_lossy(body).chars().take(300).collect::<String>();
    if status.is_server_error() {
        return Err(format!("{status} {}", text()));
    }
    if status == StatusCode::PAYLOAD_TOO_LARGE && !closes {
        // The rest of the body is left unread, so the connection cannot carry another request.
        return Err("413 without `Connection: close`".into());
    }
    let reply: Value =
        serde_json::from_slice(body).map_err(|e| format!("{status} with a body that is not JSON ({e}): {}", text()))?;
    let msg_ok = reply["msg"].as_str().is_some_and(|m| !m.trim().is_empty());
    match expect {
        Expect::Envelope => {
            let ok = status.is_client_error()
                && reply["code"].as_u64() == Some(u64::from(status.as_u16()))
                && msg_ok
                && reply.get("result") == Some(&Value::Null);
            if ok {
                Ok(())
            } else {
                Err(format!("not a 4xx envelope: {status} {}", text()))
            }
        }
        Expect::Asyncflow => {
            let code = reply["code"].as_i64().and_then(|c| i32::try_from(c).ok());
            let status_ok = matches!(status, StatusCode::OK | StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
            if status_ok && code.is_some_and(|c| ASYNCFLOW_CODES.contains(&c)) && msg_ok {
                Ok(())
            } else {
                Err(format!("not an asyncflow error: {status} {}", text()))
            }
        }
    }
}

/// Counts of a run.
#[derive(Default)]
pub(super) struct Report {
    pub(super) categories: BTreeMap<&'static str, (usize, BTreeMap<u16, usize>)>,
    pub(super) statuses: BTreeMap<u16, usize>,
    pub(super) no_answer: usize,
    pub(super) server_errors: usize,
    pub(super) failures: usize,
}

impl Report {
    pub(super) fn from(outcomes: &[Outcome]) -> Self {
        let mut r = Self::default();
        for o in outcomes {
            let entry = r.categories.entry(o.category).or_default();
            entry.0 += 1;
            match o.status {
                Some(s) => {
                    *entry.1.entry(s).or_default() += 1;
                    *r.statuses.entry(s).or_default() += 1;
                    r.server_errors += usize::from(s >= 500);
                }
                None => r.no_answer += 1,
            }
            r.failures += usize::from(o.failure.is_some());
        }
        r
    }

    pub(super) fn print(&self, stack: Stack, seed: u64, elapsed: Duration) {
        let total: usize = self.categories.values().map(|(n, _)| n).sum();
        eprintln!(
            "adversarial run on {stack:?} (seed {seed:#x}): {total} requests in {:.1} s, \
             {} not answered clearly, {} without an answer, {} 5xx",
            elapsed.as_secs_f64(),
            self.failures,
            self.no_answer,
            self.server_errors
        );
        eprintln!("  by status: {:?}", self.statuses);
        for (category, (n, statuses)) in &self.categories {
            eprintln!("  {category:<18} {n:>5}  {statuses:?}");
        }
    }
}
