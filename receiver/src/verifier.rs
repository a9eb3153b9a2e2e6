//! A callback verified: its signature checked against the app's secret and
//! its age against the tolerance ([`verify`], [`Verifier`]), and what it
//! carries ([`Callback`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderMap;

use crate::headers;
use crate::signature::{self, Accept, VerifyError, Version, DEFAULT_TOLERANCE};

/// The headers the signature's `v2` covers, as [`signature::V2_HEADERS`]
/// names them, with the names errors give them.
const V2_NAMES: [(&str, &str); 6] = [
    (headers::IDEMPOTENCY_KEY, "Idempotency-Key"),
    (headers::ATTEMPT, "X-Xtimer-Attempt"),
    (headers::REPLAY, "X-Xtimer-Replay"),
    (headers::RUN_TIME, "X-Xtimer-Run-Time"),
    (headers::SCHEDULED_TIME, "X-Xtimer-Scheduled-Time"),
    (headers::TIMER_ID, "X-Xtimer-Timer-Id"),
];

/// What a verified callback's headers say.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Callback {
    /// `X-Xtimer-Timer-Id`.
    pub timer_id: i64,
    /// `X-Xtimer-Run-Time`: when the fire was sent, Unix ms.
    pub run_time_ms: i64,
    /// `X-Xtimer-Scheduled-Time`: the fire's scheduled time, Unix ms
    /// (equal to `run_time_ms` unless the timer spreads its fires; taken
    /// from `run_time_ms` when a node too old to send it did not).
    pub scheduled_time_ms: i64,
    /// `Idempotency-Key`: `{timerId}_{scheduledMs}`, one per fire.
    pub idempotency_key: String,
    /// The signature's `t`: when xtimer signed the request, Unix seconds.
    pub signed_at: i64,
    /// `X-Xtimer-Replay: 1`: sent again by `replayFires`.
    pub replay: bool,
    /// `X-Xtimer-Attempt`: 1 for the first attempt, 2 for the first retry
    /// (a replay continues the count); `None` from a node too old to send it.
    pub attempt: Option<u32>,
    /// Which signature verified the callback: [`Version::V2`] covers the
    /// headers above too, [`Version::V1`] only `t` and the body.
    pub signed_with: Version,
}

impl AsRef<Callback> for Callback {
    fn as_ref(&self) -> &Callback {
        self
    }
}

/// Verifies a callback with `secret` and the default tolerance of 300 s:
/// the `X-Xtimer-Signature` header signs `body` (the raw bytes received)
/// and the callback headers (`v2`; `v1`, the body alone, when the header
/// has no `v2`), and was made within the tolerance of `now`. The other
/// headers are read into the [`Callback`]. See [`Verifier`] for another
/// tolerance, several secrets or `v2` required.
pub fn verify(headers: &HeaderMap, body: &[u8], secret: &[u8], now: SystemTime) -> Result<Callback, VerifyError> {
    let secrets = [secret];
    verify_headers(headers, body, &secrets, Accept::V2OrV1, DEFAULT_TOLERANCE, now)
}

/// Verifies callbacks with one or more secrets (any one matching is enough:
/// keep the old one while an app's secret is being rotated) and a
/// tolerance for the signature's age. Cheap to clone; put it in an axum
/// router's state for [`Signed`].
///
/// ```
/// use std::time::Duration;
/// let verifier = xtimer_receiver::Verifier::new("new-secret")
///     .with_secret("old-secret")
///     .with_tolerance(Duration::from_secs(60));
/// assert_eq!(verifier.tolerance(), Duration::from_secs(60));
/// ```
#[derive(Clone)]
pub struct Verifier {
    secrets: Arc<[Box<[u8]>]>,
    accept: Accept,
    tolerance: Duration,
    max_body_bytes: usize,
}

impl Verifier {
    /// The body size [`Signed`] reads at most, by default: 1 MiB.
    pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 20;

    /// Accepts signatures made with `secret`, at most [`DEFAULT_TOLERANCE`] old.
    pub fn new(secret: impl AsRef<[u8]>) -> Self {
        Self {
            secrets: Arc::from([Box::from(secret.as_ref())]),
            accept: Accept::V2OrV1,
            tolerance: DEFAULT_TOLERANCE,
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// Accepts signatures made with `secret` as well.
    pub fn with_secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        let mut secrets = self.secrets.to_vec();
        secrets.push(Box::from(secret.as_ref()));
        self.secrets = secrets.into();
        self
    }

    /// Refuses a signature whose `t` is further than `tolerance` from the
    /// receiver's clock, either way (default 300 s).
    pub fn with_tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// With `true`, refuses a callback whose signature has no `v2`
    /// ([`VerifyError::V2Required`]), so that a request stripped of its
    /// `v2` cannot pass on its `v1` with altered headers. Default `false`:
    /// `v2` when present, else `v1` (callbacks from an xtimer too old to
    /// send `v2`).
    pub fn with_v2_required(mut self, required: bool) -> Self {
        self.accept = if required { Accept::V2Only } else { Accept::V2OrV1 };
        self
    }

    /// The largest body [`Signed`] reads; a larger one is a 413.
    pub fn with_max_body_bytes(mut self, max_body_bytes: usize) -> Self {
        self.max_body_bytes = max_body_bytes;
        self
    }

    /// Which signature versions it accepts.
    pub fn accept(&self) -> Accept {
        self.accept
    }

    /// The tolerance for a signature's age.
    pub fn tolerance(&self) -> Duration {
        self.tolerance
    }

    /// The largest body [`Signed`] reads.
    pub fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    /// Verifies a callback's headers and raw body at `now`, as [`verify`] does.
    pub fn verify(&self, headers: &HeaderMap, body: &[u8], now: SystemTime) -> Result<Callback, VerifyError> {
        verify_headers(headers, body, &self.secrets, self.accept, self.tolerance, now)
    }

    /// Verifies an `X-Xtimer-Signature` value's `v1` against the raw body
    /// at `now`; returns its `t`. Without the request's other headers `v2`
    /// cannot be checked: a verifier that requires `v2` refuses with
    /// [`VerifyError::V2Required`]. Prefer [`verify`](Self::verify).
    pub fn verify_signature(&self, header: &str, body: &[u8], now: SystemTime) -> Result<i64, VerifyError> {
        if self.accept == Accept::V2Only {
            return Err(VerifyError::V2Required);
        }
        signature::verify_any(self.secrets.iter().map(|s| &s[..]), header, body, self.tolerance, unix_secs(now))
    }
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("secrets", &format_args!("[{} hidden]", self.secrets.len()))
            .field("accept", &self.accept)
            .field("tolerance", &self.tolerance)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish()
    }
}

fn verify_headers<S: AsRef<[u8]>>(
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[S],
    accept: Accept,
    tolerance: Duration,
    now: SystemTime,
) -> Result<Callback, VerifyError> {
    let signature = match headers.get(headers::SIGNATURE) {
        None => return Err(VerifyError::Missing("X-Xtimer-Signature")),
        Some(value) => value.to_str().map_err(|_| VerifyError::Malformed("not visible ASCII".into()))?,
    };
    // The headers first, so that a missing one is named rather than
    // reported as a `v2` mismatch.
    let fields = v2_fields(headers)?;
    let timer_id = number(headers, headers::TIMER_ID, "X-Xtimer-Timer-Id")?;
    let run_time_ms = number(headers, headers::RUN_TIME, "X-Xtimer-Run-Time")?;
    let scheduled_time_ms = match headers.contains_key(headers::SCHEDULED_TIME) {
        true => number(headers, headers::SCHEDULED_TIME, "X-Xtimer-Scheduled-Time")?,
        false => run_time_ms,
    };
    let idempotency_key = text(headers, headers::IDEMPOTENCY_KEY, "Idempotency-Key")?.to_owned();
    let replay = headers.get(headers::REPLAY).is_some_and(|v| v == "1");
    let attempt = match headers.contains_key(headers::ATTEMPT) {
        true => {
            let value = text(headers, headers::ATTEMPT, "X-Xtimer-Attempt")?;
            let bad = || VerifyError::BadHeader { name: "X-Xtimer-Attempt", value: value.to_owned() };
            Some(value.trim().parse().map_err(|_| bad())?)
        }
        false => None,
    };
    let secrets = secrets.iter().map(AsRef::as_ref);
    let (signed_at, signed_with) =
        signature::verify_fields(secrets, signature, &fields, body, accept, tolerance, unix_secs(now))?;
    Ok(Callback { timer_id, run_time_ms, scheduled_time_ms, idempotency_key, signed_at, replay, attempt, signed_with })
}

/// The request's headers `v2` signs, name and value. Each must be text
/// and sent at most once: two values would leave it open which one the
/// receiver reads.
fn v2_fields(headers: &HeaderMap) -> Result<Vec<(&'static str, &str)>, VerifyError> {
    let mut fields = Vec::with_capacity(V2_NAMES.len());
    for (key, name) in V2_NAMES {
        let mut values = headers.get_all(key).iter();
        let Some(value) = values.next() else { continue };
        let lossy = |v: &http::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
        if let Some(again) = values.next() {
            return Err(VerifyError::BadHeader { name, value: format!("{}, then {}", lossy(value), lossy(again)) });
        }
        let value = value.to_str().map_err(|_| VerifyError::BadHeader { name, value: lossy(value) })?;
        fields.push((key, value));
    }
    Ok(fields)
}

fn text<'h>(headers: &'h HeaderMap, key: &str, name: &'static str) -> Result<&'h str, VerifyError> {
    let value = headers.get(key).ok_or(VerifyError::Missing(name))?;
    value
        .to_str()
        .map_err(|_| VerifyError::BadHeader { name, value: String::from_utf8_lossy(value.as_bytes()).into_owned() })
}

fn number(headers: &HeaderMap, key: &str, name: &'static str) -> Result<i64, VerifyError> {
    let value = text(headers, key, name)?;
    value.trim().parse().map_err(|_| VerifyError::BadHeader { name, value: value.to_owned() })
}

/// `now` as Unix seconds (negative before 1970).
fn unix_secs(now: SystemTime) -> i64 {
    match now.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_secs()).map_or(i64::MIN, |s| -s),
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    const SECRET: &[u8] = b"whsec_test";
    const T: i64 = 1_767_225_600;
    const BODY: &[u8] = br#"{"n":1}"#;

    fn at(secs: i64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs as u64)
    }

    /// The headers an older xtimer sends with a fire of timer 42 scheduled
    /// at `T`: no attempt, and a `v1` signature alone.
    fn v1_headers(secret: &[u8], t: i64, body: &[u8]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = signature::header_value(secret, t, body);
        headers.insert("X-Xtimer-Signature", HeaderValue::from_str(&value).unwrap());
        headers.insert("X-Xtimer-Timer-Id", HeaderValue::from_static("42"));
        headers.insert("X-Xtimer-Run-Time", HeaderValue::from_static("1767225600250"));
        headers.insert("X-Xtimer-Scheduled-Time", HeaderValue::from_static("1767225600000"));
        headers.insert("Idempotency-Key", HeaderValue::from_static("42_1767225600000"));
        headers
    }

    /// Signs `headers` as xtimer does now: `v1` and `v2` over its fields.
    fn sign_v2(mut headers: HeaderMap, secret: &[u8], t: i64, body: &[u8]) -> HeaderMap {
        let fields: Vec<(String, String)> = headers
            .iter()
            .filter(|(name, _)| name.as_str() != headers::SIGNATURE)
            .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap().to_owned()))
            .collect();
        let fields: Vec<(&str, &str)> = fields.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let value = signature::header_value_v2(secret, t, &fields, body);
        headers.insert("X-Xtimer-Signature", HeaderValue::from_str(&value).unwrap());
        headers
    }

    /// The headers xtimer sends now with the second attempt of that fire.
    fn callback_headers(secret: &[u8], t: i64, body: &[u8]) -> HeaderMap {
        let mut headers = v1_headers(secret, t, body);
        headers.insert("X-Xtimer-Attempt", HeaderValue::from_static("2"));
        sign_v2(headers, secret, t, body)
    }

    #[test]
    fn a_good_callback_verifies_into_its_headers() {
        let headers = callback_headers(SECRET, T, BODY);
        assert!(headers["x-xtimer-signature"].to_str().unwrap().contains(",v2="));
        let callback = verify(&headers, BODY, SECRET, at(T + 3)).unwrap();
        assert_eq!(
            callback,
            Callback {
                timer_id: 42,
                run_time_ms: 1_767_225_600_250,
                scheduled_time_ms: 1_767_225_600_000,
                idempotency_key: "42_1767225600000".into(),
                signed_at: T,
                replay: false,
                attempt: Some(2),
                signed_with: Version::V2,
            }
        );
        let mut replayed = headers.clone();
        replayed.insert("x-xtimer-replay", HeaderValue::from_static("1"));
        let replayed = sign_v2(replayed, SECRET, T, BODY);
        let callback = verify(&replayed, BODY, SECRET, at(T)).unwrap();
        assert!(callback.replay && callback.signed_with == Version::V2, "{callback:?}");
        // An older node's callback: v1 only, no attempt, maybe no scheduled time.
        let mut old = v1_headers(SECRET, T, BODY);
        old.remove("x-xtimer-scheduled-time");
        let callback = verify(&old, BODY, SECRET, at(T)).unwrap();
        assert_eq!((callback.signed_with, callback.attempt), (Version::V1, None));
        assert_eq!(callback.scheduled_time_ms, callback.run_time_ms, "an old node's callback");
    }

    #[test]
    fn v2_refuses_a_changed_header_that_v1_would_let_through() {
        let good = callback_headers(SECRET, T, BODY);
        let changed = |name: &'static str, value: &'static str| {
            let mut headers = good.clone();
            headers.insert(name, HeaderValue::from_static(value));
            headers
        };
        let cases = [
            changed("idempotency-key", "42_1767225601000"),
            changed("x-xtimer-attempt", "1"),
            changed("x-xtimer-timer-id", "43"),
            changed("x-xtimer-run-time", "1767225600251"),
            changed("x-xtimer-scheduled-time", "1767225601000"),
            changed("x-xtimer-replay", "1"),
        ];
        for headers in cases {
            assert_eq!(verify(&headers, BODY, SECRET, at(T)), Err(VerifyError::MismatchV2), "{headers:?}");
            // A receiver that checks v1 only still takes it: v1 covers the body alone.
            let v1 = headers["x-xtimer-signature"].to_str().unwrap();
            assert_eq!(signature::verify(SECRET, v1, BODY, DEFAULT_TOLERANCE, T), Ok(()));
        }
        let mut without = good.clone();
        without.remove("x-xtimer-attempt");
        assert_eq!(verify(&without, BODY, SECRET, at(T)), Err(VerifyError::MismatchV2));
        // Spaces around a value are not part of it.
        let mut spaced = good.clone();
        spaced.insert("x-xtimer-attempt", HeaderValue::from_static(" 2 "));
        assert_eq!(verify(&spaced, BODY, SECRET, at(T)).map(|c| c.attempt), Ok(Some(2)));
        // A covered header sent twice is refused: which one would count?
        let mut twice = good.clone();
        twice.append("idempotency-key", HeaderValue::from_static("42_1767225601000"));
        let err = verify(&twice, BODY, SECRET, at(T)).unwrap_err();
        assert!(matches!(err, VerifyError::BadHeader { name: "Idempotency-Key", .. }), "{err}");
    }

    #[test]
    fn a_verifier_can_require_v2() {
        let strict = Verifier::new(SECRET).with_v2_required(true);
        assert_eq!(strict.accept(), Accept::V2Only);
        let headers = callback_headers(SECRET, T, BODY);
        assert_eq!(strict.verify(&headers, BODY, at(T)).unwrap().signed_with, Version::V2);
        // A v1-only header: fine by default, refused when v2 is required...
        let old = v1_headers(SECRET, T, BODY);
        assert_eq!(Verifier::new(SECRET).verify(&old, BODY, at(T)).unwrap().signed_with, Version::V1);
        assert_eq!(strict.verify(&old, BODY, at(T)), Err(VerifyError::V2Required));
        // ...so a request stripped of its v2 cannot pass on its v1 with an altered header.
        let mut stripped = headers.clone();
        let v1_only = stripped["x-xtimer-signature"].to_str().unwrap().split(",v2=").next().unwrap().to_owned();
        stripped.insert("x-xtimer-signature", HeaderValue::from_str(&v1_only).unwrap());
        stripped.insert("x-xtimer-attempt", HeaderValue::from_static("1"));
        assert_eq!(strict.verify(&stripped, BODY, at(T)), Err(VerifyError::V2Required));
        assert!(Verifier::new(SECRET).verify(&stripped, BODY, at(T)).is_ok(), "v1 does not cover the headers");
        assert_eq!(strict.verify_signature(&v1_only, BODY, at(T)), Err(VerifyError::V2Required));
    }

    #[test]
    fn a_changed_body_another_secret_or_a_stale_t_is_refused() {
        for (headers, mismatch) in [
            (callback_headers(SECRET, T, BODY), VerifyError::MismatchV2),
            (v1_headers(SECRET, T, BODY), VerifyError::Mismatch),
        ] {
            assert_eq!(verify(&headers, br#"{"n":2}"#, SECRET, at(T)), Err(mismatch.clone()));
            assert_eq!(verify(&headers, b"", SECRET, at(T)), Err(mismatch.clone()));
            assert_eq!(verify(&headers, BODY, b"other", at(T)), Err(mismatch));
            for now in [T + 301, T - 301, T + 86_400, 0] {
                let err = verify(&headers, BODY, SECRET, at(now)).unwrap_err();
                assert!(matches!(err, VerifyError::Stale { t: T, tolerance_secs: 300, .. }), "{now}: {err}");
            }
            assert!(verify(&headers, BODY, SECRET, at(T + 300)).is_ok());
            assert!(verify(&headers, BODY, SECRET, at(T - 300)).is_ok());
            // Before 1970 is merely very stale.
            let err = verify(&headers, BODY, SECRET, UNIX_EPOCH - Duration::from_secs(5)).unwrap_err();
            assert!(matches!(err, VerifyError::Stale { skew_secs, .. } if skew_secs == T as u64 + 5), "{err}");
        }
    }

    #[test]
    fn missing_or_malformed_headers_are_refused_by_name() {
        let good = callback_headers(SECRET, T, BODY);
        let without = |name: &str| {
            let mut headers = good.clone();
            headers.remove(name);
            verify(&headers, BODY, SECRET, at(T)).unwrap_err()
        };
        assert_eq!(without("x-xtimer-signature"), VerifyError::Missing("X-Xtimer-Signature"));
        assert_eq!(without("x-xtimer-timer-id"), VerifyError::Missing("X-Xtimer-Timer-Id"));
        assert_eq!(without("x-xtimer-run-time"), VerifyError::Missing("X-Xtimer-Run-Time"));
        assert_eq!(without("idempotency-key"), VerifyError::Missing("Idempotency-Key"));
        let with = |name: &'static str, value: &[u8]| {
            let mut headers = good.clone();
            headers.insert(name, HeaderValue::from_bytes(value).unwrap());
            verify(&headers, BODY, SECRET, at(T)).unwrap_err()
        };
        for bad in [&b"t=1767225600"[..], b"v1=00", b"t=soon,v1=00", b"garbage", "t=é".as_bytes()] {
            let err = with("x-xtimer-signature", bad);
            assert!(matches!(err, VerifyError::Malformed(_)), "{}: {err}", String::from_utf8_lossy(bad));
        }
        let err = with("x-xtimer-timer-id", b"forty-two");
        assert!(matches!(err, VerifyError::BadHeader { name: "X-Xtimer-Timer-Id", .. }), "{err}");
        let err = with("x-xtimer-scheduled-time", b"");
        assert!(matches!(err, VerifyError::BadHeader { name: "X-Xtimer-Scheduled-Time", .. }), "{err}");
        let err = with("idempotency-key", "42_é".as_bytes());
        assert!(matches!(err, VerifyError::BadHeader { name: "Idempotency-Key", .. }), "{err}");
        let err = with("x-xtimer-attempt", b"second");
        assert!(matches!(err, VerifyError::BadHeader { name: "X-Xtimer-Attempt", .. }), "{err}");
    }

    #[test]
    fn a_verifier_takes_any_of_its_secrets_and_its_own_tolerance() {
        let verifier = Verifier::new("new").with_secret("old").with_tolerance(Duration::from_secs(10));
        for secret in [&b"new"[..], b"old"] {
            let headers = callback_headers(secret, T, BODY);
            assert_eq!(verifier.verify(&headers, BODY, at(T + 10)).unwrap().signed_at, T);
            let err = verifier.verify(&headers, BODY, at(T + 11)).unwrap_err();
            assert!(matches!(err, VerifyError::Stale { skew_secs: 11, tolerance_secs: 10, .. }), "{err}");
        }
        let headers = callback_headers(b"older", T, BODY);
        assert_eq!(verifier.verify(&headers, BODY, at(T)), Err(VerifyError::MismatchV2));
        let header = signature::header_value(b"old", T, BODY);
        assert_eq!(verifier.verify_signature(&header, BODY, at(T)), Ok(T));
        assert_eq!(verifier.verify_signature(&header, b"", at(T)), Err(VerifyError::Mismatch));
        let shown = format!("{verifier:?}");
        assert!(!shown.contains("old") && shown.contains("2 hidden"), "{shown}");
        assert_eq!(verifier.max_body_bytes(), Verifier::DEFAULT_MAX_BODY_BYTES);
    }
}
