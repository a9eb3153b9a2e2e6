//! Input extractors whose rejections are [`ApiError`]s, so malformed input
//! (bad JSON, wrong types, missing or unknown fields, a bad query string, a
//! wrong content type, a body over the limit, a body that missed
//! `server.body_read_timeout_ms`) gets our envelope and a message naming
//! the field or limit, instead of axum's plain-text rejection.
//!
//! axum's `Json` and `Query` deserialize through `serde_path_to_error`, so
//! their messages already start with the path of the field at fault
//! (`notifyHTTPParam.url: invalid type: ...`); we keep that text, but for
//! a missing field, which serde names after the object that lacks it
//! (`notifyHTTPParam: missing field `url` at line 1 column 40`): that one
//! is said as every other field's problem is, `notifyHTTPParam.url: is
//! required`.

use std::error::Error as StdError;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody, JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Uri};
use axum::Json;
use serde::de::DeserializeOwned;

use crate::auth::{authorize, AuthContext};
use crate::serve::BodyReadTimeout;
use crate::{ApiError, AppState};

/// What a body that is not declared JSON gets.
const NOT_JSON_MSG: &str = "Content-Type: the request body must be JSON, sent as `application/json`";
/// What a JSON body that is not an object gets (serde would read an array
/// into a struct field by field).
const NOT_OBJECT_MSG: &str = "request body must be a JSON object";

/// A JSON object body, sent as `application/json` (or `application/*+json`).
///
/// Anything but an object is refused up front: serde would otherwise read
/// a JSON array into a struct field by field, in declaration order.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<T> FromRequest<AppState> for ApiJson<T>
where
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let limit = BodyLimit::for_path(&state.config, req.uri().path());
        if !is_json(req.headers()) {
            return Err(ApiError::Invalid(NOT_JSON_MSG.into()));
        }
        let body = Bytes::from_request(req, state).await.map_err(|rejection| bytes_rejection(rejection, limit))?;
        limit.check(body.len())?;
        match body.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => {}
            Some(_) => return Err(ApiError::Invalid(NOT_OBJECT_MSG.into())),
            None => return Err(ApiError::Invalid("request body is empty: expected a JSON object".into())),
        }
        Json::<T>::from_bytes(&body)
            .map(|Json(value)| Self(value))
            .map_err(|rejection| json_rejection(rejection, limit))
    }
}

/// The body limit of a route and the setting that sets it: batch calls
/// (`createTimers`, `applyTimers`) take `server.max_batch_body_bytes`,
/// every other route `server.max_body_bytes`.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit {
    /// Largest body, bytes.
    pub bytes: usize,
    /// The setting, for the 413's message.
    pub setting: &'static str,
}

impl BodyLimit {
    /// The limit of the route at `path`.
    pub fn for_path(config: &xtimer_core::config::ServerConfig, path: &str) -> Self {
        if path.ends_with("/createTimers") || path.ends_with("/applyTimers") {
            Self { bytes: config.max_batch_body_bytes, setting: "server.max_batch_body_bytes" }
        } else {
            Self { bytes: config.max_body_bytes, setting: "server.max_body_bytes" }
        }
    }

    /// A 413 when `len` is over the limit.
    pub fn check(self, len: usize) -> Result<(), ApiError> {
        if len > self.bytes {
            Err(self.exceeded())
        } else {
            Ok(())
        }
    }

    /// The 413 of this limit.
    pub fn exceeded(self) -> ApiError {
        ApiError::BodyTooLarge { limit: self.bytes, setting: self.setting }
    }
}

/// Whether the content type is `application/json` or `application/*+json`,
/// parameters (`; charset=utf-8`) aside; as axum's `Json` decides.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence
        .strip_prefix("application/")
        .is_some_and(|subtype| subtype == "json" || (subtype.ends_with("+json") && subtype.len() > "+json".len()))
}

/// An extractor's value: what [`ForApp`] hands on.
pub trait Extracted {
    /// The value read from the request.
    type Value;
    /// Unwraps it.
    fn into_value(self) -> Self::Value;
}

impl<T> Extracted for ApiJson<T> {
    type Value = T;
    fn into_value(self) -> T {
        self.0
    }
}

impl<T> Extracted for ApiQuery<T> {
    type Value = T;
    fn into_value(self) -> T {
        self.0
    }
}

impl<T> Extracted for QueryOrJson<T> {
    type Value = T;
    fn into_value(self) -> T {
        self.0
    }
}

/// What an input names its app by, for [`ForApp`]: `of_app!(Type, ...)`
/// for input types with an `app` field.
pub trait OfApp {
    /// The app the input acts on.
    fn app(&self) -> &str;
}

/// Implements [`OfApp`] for input types with an `app` field.
#[macro_export]
macro_rules! of_app {
    ($($t:ty),+ $(,)?) => {
        $(impl $crate::extract::OfApp for $t {
            fn app(&self) -> &str {
                &self.app
            }
        })+
    };
}

/// A request's input on behalf of its app, and the caller's context:
/// `ForApp(input, auth): ForApp<ApiJson<T>>` (or `ApiQuery`, `QueryOrJson`)
/// in a handler. Checked in this order: a token (when auth is on: a caller
/// without one learns nothing of its input), the input read, then the
/// token's app against the input's.
pub struct ForApp<E: Extracted>(pub E::Value, pub AuthContext);

impl<E, M> FromRequest<AppState, M> for ForApp<E>
where
    E: Extracted + FromRequest<AppState, M, Rejection = ApiError>,
    E::Value: OfApp,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let WithToken(input, auth) = WithToken::<E>::from_request(req, state).await?;
        authorize(&auth, input.app())?;
        Ok(Self(input, auth))
    }
}

/// A request's input and the caller's context, for input that names no
/// app or one the handler checks itself: `WithToken(input, auth):
/// WithToken<ApiQuery<T>>` (or `ApiJson`, `QueryOrJson`). Checked in this
/// order: a token (when auth is on: a caller without one learns nothing
/// of its input), then the input read.
pub struct WithToken<E: Extracted>(pub E::Value, pub AuthContext);

impl<E, M> FromRequest<AppState, M> for WithToken<E>
where
    E: Extracted + FromRequest<AppState, M, Rejection = ApiError>,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let auth = AuthContext::from_request_parts(&mut parts, state).await?;
        auth.require_token()?;
        let input = E::from_request(Request::from_parts(parts, body), state).await?.into_value();
        Ok(Self(input, auth))
    }
}

/// A query string.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parse_query(&parts.uri).map(Self)
    }
}

/// Input from the query string when there is one, else from a JSON object
/// body (any or no content type: DELETE clients often send none). With
/// neither, it fails as an empty query string does, naming the first
/// missing field.
#[derive(Debug, Clone)]
pub struct QueryOrJson<T>(pub T);

impl<T> FromRequest<AppState> for QueryOrJson<T>
where
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        if req.uri().query().is_some_and(|q| !q.is_empty()) {
            return parse_query(req.uri()).map(Self);
        }
        let limit = BodyLimit::for_path(&state.config, req.uri().path());
        let uri = req.uri().clone();
        let body = Bytes::from_request(req, state).await.map_err(|rejection| bytes_rejection(rejection, limit))?;
        limit.check(body.len())?;
        match body.iter().find(|b| !b.is_ascii_whitespace()) {
            None => return parse_query(&uri).map(Self),
            Some(b'{') => {}
            Some(_) => return Err(ApiError::Invalid(NOT_OBJECT_MSG.into())),
        }
        Json::<T>::from_bytes(&body)
            .map(|Json(value)| Self(value))
            .map_err(|rejection| json_rejection(rejection, limit))
    }
}

fn parse_query<T: DeserializeOwned>(uri: &Uri) -> Result<T, ApiError> {
    Query::<T>::try_from_uri(uri).map(|Query(value)| value).map_err(|rejection| match rejection {
        QueryRejection::FailedToDeserializeQueryString(err) => {
            let message = unknown_field_in_words(&in_words(&missing_in_words(&inner_text(&err))));
            ApiError::Invalid(format!("query string: {}", value_in_words(&message, uri)))
        }
        other => query_rejection(other),
    })
}

/// A query parameter that did not parse as the number or boolean it
/// takes, said with its name, what it takes and the value given (`id:
/// must be a whole number, got `abc``) rather than in the parser's words
/// (`id: invalid digit found in string`). Any other message is kept.
pub fn value_in_words(message: &str, uri: &Uri) -> String {
    const PARSE_ERRORS: [(&str, &str); 7] = [
        ("invalid digit found in string", "must be a whole number"),
        ("cannot parse integer from empty string", "must be a whole number"),
        ("number too large to fit in target type", "must be a whole number that fits in 64 bits"),
        ("number too small to fit in target type", "must be a whole number that fits in 64 bits"),
        ("invalid float literal", "must be a number"),
        ("cannot parse float from empty string", "must be a number"),
        ("provided string was not `true` or `false`", "must be true or false"),
    ];
    let Some((field, problem)) = message.split_once(": ") else { return message.to_owned() };
    let Some((_, takes)) = PARSE_ERRORS.iter().find(|(error, _)| *error == problem) else {
        return message.to_owned();
    };
    let given = Query::<Vec<(String, String)>>::try_from_uri(uri)
        .ok()
        .and_then(|Query(pairs)| pairs.into_iter().find(|(name, _)| name == field).map(|(_, value)| value));
    match given {
        Some(value) => format!("{field}: {takes}, got `{}`", value.chars().take(64).collect::<String>()),
        None => format!("{field}: {takes}"),
    }
}

pub use xtimer_core::suggest::{in_words, missing_in_words, unknown_field_in_words};

/// Maps a `Json` rejection to a 400 (413 when the body is over `limit`).
pub fn json_rejection(rejection: JsonRejection, limit: BodyLimit) -> ApiError {
    match rejection {
        JsonRejection::JsonDataError(err) => {
            ApiError::Invalid(unknown_field_in_words(&in_words(&missing_in_words(&inner_text(&err)))))
        }
        JsonRejection::JsonSyntaxError(err) => {
            ApiError::Invalid(format!("request body is not valid JSON: {}", inner_text(&err)))
        }
        JsonRejection::MissingJsonContentType(_) => ApiError::Invalid(NOT_JSON_MSG.into()),
        JsonRejection::BytesRejection(err) => bytes_rejection(err, limit),
        other => ApiError::Invalid(other.body_text()),
    }
}

/// Maps a `Query` rejection to a 400.
pub fn query_rejection(rejection: QueryRejection) -> ApiError {
    match rejection {
        QueryRejection::FailedToDeserializeQueryString(err) => {
            let message = unknown_field_in_words(&in_words(&missing_in_words(&inner_text(&err))));
            ApiError::Invalid(format!("query string: {message}"))
        }
        other => ApiError::Invalid(other.body_text()),
    }
}

/// Maps a body-buffering rejection to a 413 over `limit`, a 408 when the
/// body missed `server.body_read_timeout_ms` ([`BodyReadTimeout`]), else a 400.
pub fn bytes_rejection(rejection: BytesRejection, limit: BodyLimit) -> ApiError {
    if let Some(timeout) = body_read_timeout(&rejection) {
        return ApiError::BodyReadTimeout { timeout_ms: timeout.timeout_ms };
    }
    match rejection {
        BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => limit.exceeded(),
        other => ApiError::Invalid(format!("request body could not be read: {}", inner_text(&other))),
    }
}

/// The [`BodyReadTimeout`] somewhere in `err`'s cause chain, if the body
/// failed because it missed its deadline.
pub fn body_read_timeout(err: &(dyn StdError + 'static)) -> Option<BodyReadTimeout> {
    let mut cause = Some(err);
    while let Some(err) = cause {
        if let Some(timeout) = err.downcast_ref::<BodyReadTimeout>() {
            return Some(*timeout);
        }
        cause = err.source();
    }
    None
}

/// The message of a rejection's cause, without axum's generic prefix.
fn inner_text(err: &dyn StdError) -> String {
    err.source().map_or_else(|| err.to_string(), ToString::to_string)
}

#[cfg(test)]
mod tests {
    use super::{missing_in_words, unknown_field_in_words};

    #[test]
    fn an_unknown_field_near_a_known_one_is_said_with_the_one_meant() {
        assert_eq!(
            unknown_field_in_words(
                "notifyHttpParam: unknown field `notifyHttpParam`, expected one of `app`, `name`, `notifyHTTPParam` \
                 at line 1 column 30"
            ),
            "notifyHttpParam: unknown field `notifyHttpParam`: did you mean `notifyHTTPParam`?"
        );
        assert_eq!(
            unknown_field_in_words("idd: unknown field `idd`, expected `id` or `app`"),
            "idd: unknown field `idd`: did you mean `id`?"
        );
        let far = "schedule: unknown field `schedule`, expected one of `app`, `name` at line 1 column 9";
        assert_eq!(unknown_field_in_words(far), far);
        assert_eq!(unknown_field_in_words("name: invalid type"), "name: invalid type");
    }

    #[test]
    fn a_missing_field_is_named_by_its_path_and_said_to_be_required() {
        assert_eq!(missing_in_words("missing field `name` at line 1 column 84"), "name: is required");
        assert_eq!(
            missing_in_words("notifyHTTPParam: missing field `url` at line 1 column 77"),
            "notifyHTTPParam.url: is required"
        );
        assert_eq!(missing_in_words("timers[0]: missing field `app`"), "timers[0].app: is required");
        assert_eq!(missing_in_words("missing field `id`"), "id: is required");
        let other = "bogus: unknown field `bogus`, expected one of `app`, `name` at line 1 column 9";
        assert_eq!(missing_in_words(other), other);
        assert_eq!(missing_in_words("odd missing field `x` here"), "odd missing field `x` here");
    }
}
