//! The axum side (feature `axum`): the [`Signed`] extractor, its 401
//! [`Rejection`], and [`Repeat`] as a 409.

use std::time::SystemTime;

use axum::extract::{FromRef, FromRequest, Request};
use axum::http::{header, StatusCode};
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

impl IntoResponse for Repeat {
    /// 409 `already done: {key}`: xtimer records the fire as succeeded.
    fn into_response(self) -> Response {
        (StatusCode::CONFLICT, format!("{self}\n")).into_response()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::UNIX_EPOCH;

    use axum::body::Body;
    use axum::extract::State;
    use axum::routing::post;
    use axum::Router;
    use tower::ServiceExt;

    use super::*;
    use crate::{dedupe, signature, MemorySeen};

    const SECRET: &str = "whsec_axum";

    #[derive(Clone)]
    struct AppState {
        verifier: Verifier,
        seen: Arc<MemorySeen>,
    }

    impl FromRef<AppState> for Verifier {
        fn from_ref(state: &AppState) -> Self {
            state.verifier.clone()
        }
    }

    async fn hook(State(state): State<AppState>, signed: Signed) -> Result<String, Repeat> {
        dedupe(&state.seen, &signed).await?;
        let body: serde_json::Value = signed.json().unwrap();
        Ok(format!("{} {} {}", signed.callback.timer_id, signed.callback.idempotency_key, body["n"]))
    }

    fn app() -> Router {
        let state =
            AppState { verifier: Verifier::new(SECRET).with_max_body_bytes(64), seen: Arc::new(MemorySeen::default()) };
        Router::new().route("/hook", post(hook)).with_state(state)
    }

    fn now_secs() -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
    }

    fn request(signature: Option<String>, key: &str, body: &'static str) -> Request {
        let mut builder = Request::post("/hook")
            .header("x-xtimer-timer-id", "9")
            .header("x-xtimer-run-time", "1767225600000")
            .header("x-xtimer-scheduled-time", "1767225600000")
            .header("idempotency-key", key);
        if let Some(signature) = signature {
            builder = builder.header("x-xtimer-signature", signature);
        }
        builder.body(Body::from(body)).unwrap()
    }

    fn signed(key: &str, body: &'static str) -> Request {
        request(Some(signature::header_value(SECRET.as_bytes(), now_secs(), body.as_bytes())), key, body)
    }

    async fn send(app: &Router, request: Request) -> (StatusCode, String) {
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_signed_callback_is_handled_once_and_a_repeat_is_a_409() {
        let app = app();
        assert_eq!(send(&app, signed("9_1", r#"{"n":1}"#)).await, (StatusCode::OK, "9 9_1 1".into()));
        let (status, text) = send(&app, signed("9_1", r#"{"n":1}"#)).await;
        assert_eq!((status, text.as_str()), (StatusCode::CONFLICT, "already done: 9_1\n"));
        assert_eq!(send(&app, signed("9_2", r#"{"n":2}"#)).await, (StatusCode::OK, "9 9_2 2".into()));
    }

    #[tokio::test]
    async fn a_bad_or_stale_signature_is_a_401() {
        let app = app();
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
        let app = app();
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
