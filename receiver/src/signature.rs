//! Signed callbacks: the `X-Xtimer-Signature` header, Stripe style.
//!
//! Every HTTP callback carries
//!
//! ```text
//! X-Xtimer-Signature: t=1767225600,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd
//! ```
//!
//! where `t` is the Unix second the request was signed and `v1` is the
//! lower-case hex HMAC-SHA256, keyed with the app's signing secret, of the
//! bytes `"{t}." + body` (the body exactly as sent; empty when there is
//! none). A receiver recomputes the HMAC with its secret, compares in
//! constant time, and refuses a `t` too far from its own clock so a
//! captured request cannot be replayed later ([`verify`] does all three).
//! While a secret is being rotated a header may carry several `v1` entries;
//! any one matching is enough.
//!
//! This module needs nothing but the hashing crates; the crate root's
//! [`verify`](crate::verify) and [`Verifier`](crate::Verifier) apply it to
//! a request's headers.

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header's name.
pub const HEADER: &str = "X-Xtimer-Signature";

/// How far a signature's `t` may be from the receiver's clock, by default.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

type HmacSha256 = Hmac<Sha256>;

fn mac(secret: &[u8], t: i64, body: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts any key length");
    mac.update(itoa::Buffer::new().format(t).as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The lower-case hex HMAC-SHA256 of `"{t}." + body` keyed with `secret`.
pub fn sign(secret: &[u8], t: i64, body: &[u8]) -> String {
    let mut out = String::with_capacity(64);
    push_hex(&mut out, secret, t, body);
    out
}

/// The header value `t={t},v1={sign(secret, t, body)}`.
pub fn header_value(secret: &[u8], t: i64, body: &[u8]) -> String {
    let mut out = String::with_capacity(100);
    out.push_str("t=");
    out.push_str(itoa::Buffer::new().format(t));
    out.push_str(",v1=");
    push_hex(&mut out, secret, t, body);
    out
}

/// Appends [`sign`]'s hex to `out`, without an intermediate string.
fn push_hex(out: &mut String, secret: &[u8], t: i64, body: &[u8]) {
    let mut hex = [0u8; 64];
    // 32 bytes of HMAC-SHA256 always fit 64 hex digits.
    hex::encode_to_slice(mac(secret, t, body).finalize().into_bytes(), &mut hex).expect("64 hex digits");
    out.push_str(std::str::from_utf8(&hex).expect("hex digits are ASCII"));
}

/// Why a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// A header every callback carries is absent (its name).
    #[error("missing header {0}")]
    Missing(&'static str),
    /// The header is not `t=<secs>,v1=<hex>[,v1=<hex>...]`.
    #[error("malformed signature header: {0}")]
    Malformed(String),
    /// Another callback header is not what xtimer sends (say a timer id
    /// that is not a number).
    #[error("header {name} is not what xtimer sends: `{value}`")]
    BadHeader {
        /// The header's name.
        name: &'static str,
        /// Its value, lossily as text.
        value: String,
    },
    /// `t` is further than the tolerance from now (a replay, or a skewed clock).
    #[error("signature timestamp {t} is {skew_secs} s away from now; at most {tolerance_secs} s are allowed")]
    Stale {
        /// The header's timestamp.
        t: i64,
        /// Its distance from now, seconds.
        skew_secs: u64,
        /// The tolerance, seconds.
        tolerance_secs: u64,
    },
    /// No `v1` matches the body under this secret.
    #[error("no v1 signature matches the body")]
    Mismatch,
}

/// Checks a signature header against `body` and `secret` at `now_secs`
/// (Unix seconds): well-formed, `t` within `tolerance` of now, and some
/// `v1` equal (in constant time) to the HMAC of `"{t}." + body`.
pub fn verify(secret: &[u8], header: &str, body: &[u8], tolerance: Duration, now_secs: i64) -> Result<(), VerifyError> {
    verify_any([secret], header, body, tolerance, now_secs).map(drop)
}

/// [`verify`] with several accepted secrets (a receiver's side of a
/// rotation: the old and the new one), any one matching any `v1` being
/// enough. Returns the header's `t`, the Unix second it was signed.
pub fn verify_any<'a>(
    secrets: impl IntoIterator<Item = &'a [u8]>,
    header: &str,
    body: &[u8],
    tolerance: Duration,
    now_secs: i64,
) -> Result<i64, VerifyError> {
    let (t, candidates) = parse(header)?;
    let skew_secs = now_secs.abs_diff(t);
    if skew_secs > tolerance.as_secs() {
        return Err(VerifyError::Stale { t, skew_secs, tolerance_secs: tolerance.as_secs() });
    }
    for secret in secrets {
        let expected = mac(secret, t, body);
        if candidates.iter().any(|c| expected.clone().verify_slice(c).is_ok()) {
            return Ok(t);
        }
    }
    Err(VerifyError::Mismatch)
}

/// The header's `t` and its `v1` signatures, decoded.
fn parse(header: &str) -> Result<(i64, Vec<Vec<u8>>), VerifyError> {
    let mut t = None;
    let mut candidates = Vec::new();
    for part in header.split(',') {
        let (key, value) =
            part.trim().split_once('=').ok_or_else(|| VerifyError::Malformed(format!("`{part}` is not key=value")))?;
        match key {
            "t" => {
                let secs = value
                    .parse::<i64>()
                    .map_err(|_| VerifyError::Malformed(format!("t `{value}` is not Unix seconds")))?;
                t = Some(secs);
            }
            "v1" => match hex::decode(value) {
                Ok(bytes) => candidates.push(bytes),
                Err(_) => return Err(VerifyError::Malformed(format!("v1 `{value}` is not hex"))),
            },
            // Other schemes (v0, future versions) are ignored, as Stripe does.
            _ => {}
        }
    }
    let t = t.ok_or_else(|| VerifyError::Malformed("no t=".into()))?;
    if candidates.is_empty() {
        return Err(VerifyError::Malformed("no v1=".into()));
    }
    Ok((t, candidates))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec_test";
    const NOW: i64 = 1_767_225_600;

    #[test]
    fn matches_a_reference_hmac() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let mut mac = HmacSha256::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Ours is that HMAC over "{t}." + body.
        let mut mac = HmacSha256::new_from_slice(SECRET).unwrap();
        mac.update(b"1767225600.{\"a\":1}");
        assert_eq!(sign(SECRET, NOW, b"{\"a\":1}"), hex::encode(mac.finalize().into_bytes()));
    }

    #[test]
    fn a_signed_body_verifies_and_any_change_does_not() {
        let header = header_value(SECRET, NOW, b"{\"a\":1}");
        assert!(header.starts_with("t=1767225600,v1="), "{header}");
        assert_eq!(verify(SECRET, &header, b"{\"a\":1}", DEFAULT_TOLERANCE, NOW + 10), Ok(()));
        assert_eq!(verify(SECRET, &header, b"{\"a\":2}", DEFAULT_TOLERANCE, NOW), Err(VerifyError::Mismatch));
        assert_eq!(verify(b"other", &header, b"{\"a\":1}", DEFAULT_TOLERANCE, NOW), Err(VerifyError::Mismatch));
        let moved = header.replace("t=1767225600", "t=1767225601");
        assert_eq!(verify(SECRET, &moved, b"{\"a\":1}", DEFAULT_TOLERANCE, NOW), Err(VerifyError::Mismatch));
    }

    #[test]
    fn an_old_signature_is_refused_as_a_replay() {
        let header = header_value(SECRET, NOW, b"");
        let err = verify(SECRET, &header, b"", Duration::from_secs(300), NOW + 301).unwrap_err();
        assert!(matches!(err, VerifyError::Stale { skew_secs: 301, .. }), "{err}");
        assert_eq!(verify(SECRET, &header, b"", Duration::from_secs(300), NOW - 300), Ok(()));
        // A `t` from the future is as suspect as an old one.
        let err = verify(SECRET, &header, b"", Duration::from_secs(300), NOW - 301).unwrap_err();
        assert!(matches!(err, VerifyError::Stale { skew_secs: 301, tolerance_secs: 300, .. }), "{err}");
    }

    #[test]
    fn any_of_several_v1_entries_may_match() {
        let good = sign(SECRET, NOW, b"x");
        let header = format!("t={NOW},v1={},v0=zz,v1={good}", "00".repeat(32));
        assert_eq!(verify(SECRET, &header, b"x", DEFAULT_TOLERANCE, NOW), Ok(()));
    }

    #[test]
    fn any_of_several_secrets_may_match() {
        let header = header_value(b"new", NOW, b"x");
        let secrets: [&[u8]; 2] = [b"old", b"new"];
        assert_eq!(verify_any(secrets, &header, b"x", DEFAULT_TOLERANCE, NOW + 1), Ok(NOW));
        assert_eq!(verify_any([&b"old"[..]], &header, b"x", DEFAULT_TOLERANCE, NOW), Err(VerifyError::Mismatch));
        assert_eq!(verify_any([], &header, b"x", DEFAULT_TOLERANCE, NOW), Err(VerifyError::Mismatch));
    }

    #[test]
    fn malformed_headers_are_named() {
        for header in ["", "t=1", "v1=00", "t=x,v1=00", "t=1,v1=zz", "garbage", "t=1;v1=00"] {
            let err = verify(SECRET, header, b"", DEFAULT_TOLERANCE, 1).unwrap_err();
            assert!(matches!(err, VerifyError::Malformed(_)), "{header}: {err}");
        }
    }
}
