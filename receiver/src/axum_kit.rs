//! The axum side (feature `axum`): the [`Signed`] extractor, its 401
//! [`Rejection`], and [`Repeat`] as a 409 or a 503.

use std::time::SystemTime;

use axum::extract::{FromRef, FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::{Callback, Repeat, Verifier, VerifyError};

/// A callback whose signature and age the [`Verifier`] in the router's
/// state accepted (any state `S` with `Verifier: FromRef<S>`, the
/// `Verifier` itself included), with its raw body.
///
/// Reads the whole body, at most [`Verifier::max_body_bytes`]; as the last
/// argument of a handler, like every extractor of the body. Refuses with a
/// [`Rejection`]: **401** for a missing, malformed, wrong or stale
/// signature (xtimer does not retry a 401: the fire fails at once), 413
/// for a body over the limit.
#[derive(Debug, Clone)]
pub struct Signed {
    /// What the headers say.
    pub callback: Callback,
    /// The body exactly as received (and signed).
    pub body: Bytes,
}

impl Signed {
    /// The body parsed as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

impl AsRef<Callback> for Signed {
    fn as_ref(&self) -> &Callback {
        &self.callback
    }
}

impl<S> FromRequest<S> for Signed
where
    Verifier: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Rejection;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let verifier = Verifier::from_ref(state);
        let limit = verifier.max_body_bytes();
        let (parts, body) = request.into_parts();
        let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(Rejection::TooLarge { limit });
        }
        let body = axum::body::to_bytes(body, limit).await.map_err(|err| {
            let err = err.into_inner();
            if err.is::<http_body_util::LengthLimitError>() {
                Rejection::TooLarge { limit }
            } else {
                Rejection::Body(err.to_string())
            }
        })?;
        let callback = verifier.verify(&parts.headers, &body, SystemTime::now())?;
        Ok(Self { callback, body })
    }
}

/// Why [`Signed`] refused a request; as a response, a status and the
/// reason as plain text.
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// 401: the signature or another callback header is missing or wrong,
    /// or the signature is too old (or from the future).
    #[error("{0}")]
    Unverified(#[from] VerifyError),
    /// 413: the body is larger than the verifier reads.
    #[error("the body is over {limit} bytes")]
    TooLarge {
        /// [`Verifier::max_body_bytes`].
        limit: usize,
    },
    /// 400: the body could not be read (the client went away).
    #[error("the body could not be read: {0}")]
    Body(String),
}

impl Rejection {
    /// The response's status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unverified(_) => StatusCode::UNAUTHORIZED,
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Body(_) => StatusCode::BAD_REQUEST,
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        (self.status(), format!("xtimer callback refused: {self}\n")).into_response()
    }
}

impl Repeat {
    /// The response's status: 409 for [`Repeat::Done`], 503 for
    /// [`Repeat::InFlight`].
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Done { .. } => StatusCode::CONFLICT,
            Self::InFlight { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl IntoResponse for Repeat {
    /// 409 `already done: {key}` (xtimer records the fire as succeeded),
    /// or 503 `in progress: {key}; ...` with `Retry-After` (xtimer retries).
    fn into_response(self) -> Response {
        let mut response = (self.status(), format!("{self}\n")).into_response();
        if let Self::InFlight { retry_after_secs, .. } = self {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
        }
        response
    }
}

impl From<Repeat> for Response {
    /// [`Repeat`]'s response: a handler answering `Result<_, Response>`
    /// can use [`dedupe_with`](crate::dedupe_with) and `?` on [`begin`](crate::begin).
    fn from(repeat: Repeat) -> Self {
        repeat.into_response()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::UNIX_EPOCH;

    use axum::body::Body;
    use axum::extract::State;
    use axum::routing::post;
    use axum::Router;
    use tokio::sync::Semaphore;
    use tower::ServiceExt;

    use super::*;
    use crate::{begin, dedupe_with, signature, MemorySeen};

    const SECRET: &str = "whsec_axum";

    #[derive(Clone)]
    struct AppState {
        verifier: Verifier,
        seen: Arc<MemorySeen>,
        /// How many times each handler's work failed, then succeeded.
        failed: Arc<AtomicUsize>,
        done: Arc<AtomicUsize>,
        /// A body `{"n":0}` fails its first `fail_first` attempts.
        fail_first: usize,
        /// A body `{"n":-1}` waits for a permit before its work ends.
        gate: Arc<Semaphore>,
    }

    impl FromRef<AppState> for Verifier {
        fn from_ref(state: &AppState) -> Self {
            state.verifier.clone()
        }
    }

    /// The work: `n` 0 fails `fail_first` times, -1 waits at the gate.
    async fn work(state: &AppState, signed: &Signed) -> Result<String, Response> {
        let body: serde_json::Value = signed.json().unwrap();
        if body["n"] == -1 {
            state.gate.acquire().await.unwrap().forget();
        }
        if body["n"] == 0 && state.failed.load(Ordering::SeqCst) < state.fail_first {
            state.failed.fetch_add(1, Ordering::SeqCst);
            return Err((StatusCode::INTERNAL_SERVER_ERROR, "the database is down\n").into_response());
        }
        state.done.fetch_add(1, Ordering::SeqCst);
        Ok(format!("{} {} {}", signed.callback.timer_id, signed.callback.idempotency_key, body["n"]))
    }

    /// begin, work, then commit or abort, as the README shows.
    async fn hook(State(state): State<AppState>, signed: Signed) -> Result<String, Response> {
        let claim = begin(&state.seen, &signed).await?;
        match work(&state, &signed).await {
            Ok(answer) => {
                claim.commit().await;
                Ok(answer)
            }
            Err(failure) => {
                claim.abort().await;
                Err(failure)
            }
        }
    }

    /// The same with the closure helper.
    async fn hook_with(State(state): State<AppState>, signed: Signed) -> Result<String, Response> {
        dedupe_with(&state.seen, &signed, || work(&state, &signed)).await
    }

    fn state(fail_first: usize) -> AppState {
        AppState {
            verifier: Verifier::new(SECRET).with_max_body_bytes(64),
            seen: Arc::new(MemorySeen::default()),
            failed: Arc::default(),
            done: Arc::default(),
            fail_first,
            gate: Arc::new(Semaphore::new(0)),
        }
    }

    fn app(state: AppState) -> Router {
        Router::new().route("/hook", post(hook)).route("/with", post(hook_with)).with_state(state)
    }

    fn now_secs() -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
    }

    fn request_to(path: &str, signature: Option<String>, key: &str, body: &'static str) -> Request {
        let mut builder = Request::post(path)
            .header("x-xtimer-timer-id", "9")
            .header("x-xtimer-run-time", "1767225600000")
            .header("x-xtimer-scheduled-time", "1767225600000")
            .header("idempotency-key", key);
        if let Some(signature) = signature {
            builder = builder.header("x-xtimer-signature", signature);
        }
        builder.body(Body::from(body)).unwrap()
    }

    fn request(signature: Option<String>, key: &str, body: &'static str) -> Request {
        request_to("/hook", signature, key, body)
    }

    /// A callback to `path` signed as xtimer signs it now: `v1` and `v2`,
    /// attempt 1.
    fn signed_to(path: &str, key: &str, body: &'static str) -> Request {
        let mut request = request_to(path, None, key, body);
        request.headers_mut().insert("x-xtimer-attempt", HeaderValue::from_static("1"));
        let fields: Vec<(&str, &str)> =
            request.headers().iter().map(|(name, value)| (name.as_str(), value.to_str().unwrap())).collect();
        let value = signature::header_value_v2(SECRET.as_bytes(), now_secs(), &fields, body.as_bytes());
        request.headers_mut().insert("x-xtimer-signature", HeaderValue::from_str(&value).unwrap());
        request
    }

    fn signed(key: &str, body: &'static str) -> Request {
        signed_to("/hook", key, body)
    }

    async fn send(app: &Router, request: Request) -> (StatusCode, String) {
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_signed_callback_is_handled_once_and_a_repeat_is_a_409() {
        let app = app(state(0));
        assert_eq!(send(&app, signed("9_1", r#"{"n":1}"#)).await, (StatusCode::OK, "9 9_1 1".into()));
        let (status, text) = send(&app, signed("9_1", r#"{"n":1}"#)).await;
        assert_eq!((status, text.as_str()), (StatusCode::CONFLICT, "already done: 9_1\n"));
        assert_eq!(send(&app, signed("9_2", r#"{"n":2}"#)).await, (StatusCode::OK, "9 9_2 2".into()));
        // A v1-only callback (an older xtimer) passes as well.
        let v1 = signature::header_value(SECRET.as_bytes(), now_secs(), br#"{"n":3}"#);
        assert_eq!(send(&app, request(Some(v1), "9_3", r#"{"n":3}"#)).await, (StatusCode::OK, "9 9_3 3".into()));
    }

    /// The old `dedupe` recorded the key before the work: the retry of a
    /// failed attempt got a 409, which xtimer counts as succeeded, and the
    /// work never happened.
    #[tokio::test]
    async fn a_failed_attempt_is_done_by_its_retry_not_answered_409() {
        for path in ["/hook", "/with"] {
            let state = state(2);
            let app = app(state.clone());
            for _ in 0..2 {
                let (status, text) = send(&app, signed_to(path, "9_1", r#"{"n":0}"#)).await;
                assert_eq!((status, text.as_str()), (StatusCode::INTERNAL_SERVER_ERROR, "the database is down\n"));
            }
            assert_eq!(send(&app, signed_to(path, "9_1", r#"{"n":0}"#)).await, (StatusCode::OK, "9 9_1 0".into()));
            assert_eq!(send(&app, signed_to(path, "9_1", r#"{"n":0}"#)).await.0, StatusCode::CONFLICT);
            assert_eq!((state.failed.load(Ordering::SeqCst), state.done.load(Ordering::SeqCst)), (2, 1), "{path}");
        }
    }

    /// A repeat arriving while the first is still at work must not be
    /// counted as done (a 409): the first may yet fail.
    #[tokio::test]
    async fn a_repeat_while_the_first_is_in_flight_is_a_503_not_a_409() {
        for path in ["/hook", "/with"] {
            let state = state(0);
            let app = app(state.clone());
            let first = tokio::spawn(app.clone().oneshot(signed_to(path, "9_1", r#"{"n":-1}"#)));
            // The first holds the key once its work waits at the gate.
            while state.seen.is_empty() {
                tokio::task::yield_now().await;
            }
            let response = app.clone().oneshot(signed_to(path, "9_1", r#"{"n":-1}"#)).await.unwrap();
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{path}");
            assert_eq!(response.headers()[header::RETRY_AFTER], "10");
            let text = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
            assert_eq!(&text[..], b"in progress: 9_1; retry in 10 s\n");
            state.gate.add_permits(1);
            assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
            assert_eq!(send(&app, signed_to(path, "9_1", r#"{"n":-1}"#)).await.0, StatusCode::CONFLICT);
            assert_eq!(state.done.load(Ordering::SeqCst), 1);
        }
    }

    /// A handler cancelled mid-work (xtimer's timeout closed the
    /// connection) frees its key: the retry does the work.
    #[tokio::test]
    async fn a_cancelled_handler_frees_its_key() {
        let state = state(0);
        let app = app(state.clone());
        let first = tokio::spawn(app.clone().oneshot(signed("9_1", r#"{"n":-1}"#)));
        while state.seen.is_empty() {
            tokio::task::yield_now().await;
        }
        first.abort();
        assert!(first.await.unwrap_err().is_cancelled());
        assert!(state.seen.is_empty(), "the dropped claim was abandoned");
        state.gate.add_permits(1);
        assert_eq!(send(&app, signed("9_1", r#"{"n":-1}"#)).await, (StatusCode::OK, "9 9_1 -1".into()));
    }

    #[tokio::test]
    async fn a_changed_header_fails_v2_and_a_verifier_may_require_it() {
        let app = app(state(0));
        let mut changed = signed("9_1", r#"{"n":1}"#);
        changed.headers_mut().insert("idempotency-key", HeaderValue::from_static("9_2"));
        let (status, text) = send(&app, changed).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{text}");
        assert!(text.contains("no v2 signature matches the body and headers"), "{text}");
        let mut changed = signed("9_1", r#"{"n":1}"#);
        changed.headers_mut().insert("x-xtimer-attempt", HeaderValue::from_static("2"));
        assert_eq!(send(&app, changed).await.0, StatusCode::UNAUTHORIZED);

        let mut strict = state(0);
        strict.verifier = strict.verifier.with_v2_required(true);
        let strict = self::app(strict);
        let v1 = signature::header_value(SECRET.as_bytes(), now_secs(), br#"{"n":1}"#);
        let (status, text) = send(&strict, request(Some(v1), "9_1", r#"{"n":1}"#)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{text}");
        assert!(text.contains("v2 is required"), "{text}");
        assert_eq!(send(&strict, signed("9_1", r#"{"n":1}"#)).await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_bad_or_stale_signature_is_a_401() {
        let app = app(state(0));
        let tampered = signature::header_value(SECRET.as_bytes(), now_secs(), br#"{"n":1}"#);
        let stale = signature::header_value(SECRET.as_bytes(), now_secs() - 600, br#"{"n":1}"#);
        let future = signature::header_value(SECRET.as_bytes(), now_secs() + 600, br#"{"n":1}"#);
        let other = signature::header_value(b"other", now_secs(), br#"{"n":1}"#);
        let cases = [
            (Some(tampered), r#"{"n":2}"#, "no v1 signature matches the body"),
            (Some(stale), r#"{"n":1}"#, "is 600 s away from now"),
            (Some(future), r#"{"n":1}"#, "is 600 s away from now"),
            (Some(other), r#"{"n":1}"#, "no v1 signature matches the body"),
            (None, r#"{"n":1}"#, "missing header X-Xtimer-Signature"),
            (Some("t=1,v1=zz".into()), r#"{"n":1}"#, "malformed signature header"),
        ];
        for (signature, body, why) in cases {
            let (status, text) = send(&app, request(signature.clone(), "9_1", body)).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{signature:?}: {text}");
            assert!(text.starts_with("xtimer callback refused: ") && text.contains(why), "{signature:?}: {text}");
        }
        // None of those counted as handling the fire.
        assert_eq!(send(&app, signed("9_1", r#"{"n":1}"#)).await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_a_413() {
        let app = app(state(0));
        let big = "x".repeat(65).leak();
        // Read up to the limit (the request carries no Content-Length)...
        let (status, text) = send(&app, signed("9_1", big)).await;
        assert_eq!(
            (status, text.as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, "xtimer callback refused: the body is over 64 bytes\n")
        );
        // ...or refused on its Content-Length alone.
        let mut request = signed("9_1", big);
        request.headers_mut().insert(header::CONTENT_LENGTH, 65.into());
        assert_eq!(send(&app, request).await.0, StatusCode::PAYLOAD_TOO_LARGE);
        let exactly = "x".repeat(56).leak();
        let (status, text) = send(&app, signed("9_1", &*format!("{{\"n\":\"{exactly}\"}}").leak())).await;
        assert_eq!(status, StatusCode::OK, "{text}");
    }
}
