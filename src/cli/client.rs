//! The HTTP client of the command-line commands: one call, its envelope
//! unwrapped, and every failure mapped to an exit code a script can test.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

/// Exit codes of the client commands.
pub mod exit {
    /// It worked.
    pub const OK: u8 = 0;
    /// The server could not be reached, or answered something unreadable.
    pub const UNREACHABLE: u8 = 1;
    /// The command line is wrong (clap's own code).
    pub const USAGE: u8 = 2;
    /// The server refused the input (HTTP 400, 413).
    pub const INVALID: u8 = 3;
    /// No such timer (HTTP 404), or no such route on this server.
    pub const NOT_FOUND: u8 = 4;
    /// No token, an unknown one, or one of another app (HTTP 401, 403).
    pub const DENIED: u8 = 5;
    /// A timer of that name exists (HTTP 409).
    pub const CONFLICT: u8 = 6;
    /// The server is overloaded or failed (HTTP 429, 5xx): try again later.
    pub const SERVER: u8 = 7;
}

/// A failed call: what to print and the exit code.
#[derive(Debug, thiserror::Error)]
#[error("{msg}")]
pub struct Failure {
    pub msg: String,
    pub code: u8,
}

impl Failure {
    fn unreachable(msg: String) -> Self {
        Self { msg, code: exit::UNREACHABLE }
    }

    /// A failure of the command line itself (a bad file, a missing flag).
    pub fn usage(msg: impl Into<String>) -> Self {
        Self { msg: msg.into(), code: exit::USAGE }
    }
}

/// The exit code of an HTTP error status.
pub fn exit_code(status: StatusCode) -> u8 {
    match status.as_u16() {
        400 | 408 | 413 | 422 => exit::INVALID,
        401 | 403 => exit::DENIED,
        404 | 405 => exit::NOT_FOUND,
        409 => exit::CONFLICT,
        _ => exit::SERVER,
    }
}

/// A server of the timer API.
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    /// A client of `server` (`http://host:port`), sending `token` as a bearer token.
    pub fn new(server: &str, token: Option<String>) -> Result<Self, Failure> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Failure::unreachable(format!("cannot build an HTTP client: {e}")))?;
        Ok(Self { http, base: server.trim_end_matches('/').to_owned(), token })
    }

    /// Calls `/api/xtimer/{route}` with `query` and an optional JSON
    /// `body`; returns the envelope's `result`.
    pub async fn call(
        &self,
        method: Method,
        route: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Value, Failure> {
        let url = format!("{}/api/xtimer/{route}", self.base);
        let mut req = self.http.request(method, &url).query(query);
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            let bytes = serde_json::to_vec(body).expect("a JSON value serializes");
            req = req.header(reqwest::header::CONTENT_TYPE, "application/json").body(bytes);
        }
        let resp = req.send().await.map_err(|e| Failure::unreachable(unreachable(&self.base, &url, &e)))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| Failure::unreachable(format!("reading the reply of {url}: {e}")))?;
        let envelope: Value = serde_json::from_str(&text).map_err(|_| Failure {
            msg: format!(
                "{url} answered HTTP {status} with no JSON envelope: {}",
                text.chars().take(200).collect::<String>()
            ),
            code: if status.is_success() { exit::UNREACHABLE } else { exit_code(status) },
        })?;
        if status.is_success() && envelope["code"] == 0 {
            return Ok(envelope["result"].clone());
        }
        let msg = envelope["msg"].as_str().unwrap_or("no message").to_owned();
        let status = if status.is_success() {
            envelope["code"].as_u64().and_then(|c| StatusCode::from_u16(c as u16).ok()).unwrap_or(status)
        } else {
            status
        };
        Err(Failure { msg: format!("{msg} (HTTP {})", status.as_u16()), code: exit_code(status) })
    }
}

/// Why `url` could not be called, and, when no server answers at `base`,
/// what to do: start one, or name the one to call.
fn unreachable(base: &str, url: &str, err: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut why = err.to_string();
    let mut cause = err.source();
    while let Some(err) = cause {
        why = format!("{why}: {err}");
        cause = err.source();
    }
    if err.is_connect() {
        format!(
            "cannot reach {url}: no xtimer server answers at {base} ({why}): start one with `xtimer serve`, or \
             name the one to call with `--server http://HOST:PORT` (or XTIMER_SERVER)"
        )
    } else if err.is_timeout() {
        format!("cannot reach {url}: no answer in time ({why}); is {base} an xtimer server? (`--server`)")
    } else {
        format!("cannot reach {url}: {why}")
    }
}
