//! The envelope of every reply: `{"code": 0, "msg": "ok", "result": ...}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

/// A successful reply: HTTP 200 with `{"code": 0, "msg": "ok", "result": T}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope<T>(pub T);

#[derive(Serialize)]
struct Body<'a, T> {
    code: u16,
    msg: &'a str,
    result: Option<T>,
}

impl<T: Serialize> IntoResponse for Envelope<T> {
    fn into_response(self) -> Response {
        Json(Body { code: 0, msg: "ok", result: Some(self.0) }).into_response()
    }
}

/// An error reply: `status` with `{"code": <status>, "msg": msg, "result": null}`.
pub fn error_response(status: StatusCode, msg: &str) -> Response {
    (status, Json(Body::<()> { code: status.as_u16(), msg, result: None })).into_response()
}

/// An error reply that says more than its message: `status` with
/// `{"code": <status>, "msg": msg, "result": result}` (a held `dedupeKey`'s
/// 409 names its holder's id).
pub fn error_response_with<T: Serialize>(status: StatusCode, msg: &str, result: T) -> Response {
    (status, Json(Body { code: status.as_u16(), msg, result: Some(result) })).into_response()
}
