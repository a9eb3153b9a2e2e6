//! Signed callbacks: the `X-Xtimer-Signature` header, Stripe style.
//!
//! Every HTTP callback carries
//!
//! ```text
//! X-Xtimer-Signature: t=1767225600,v1=5257a869...08d8bd,v2=9f2c61d0...41be07
//! ```
//!
//! where `t` is the Unix second the request was signed and each `vN` is a
//! lower-case hex HMAC-SHA256 keyed with the app's signing secret:
//!
//! - **`v1`** signs the bytes `"{t}." + body` (the body exactly as sent;
//!   empty when there is none). It does not cover the other headers.
//! - **`v2`** signs `t`, the fire's own headers and the body, as this
//!   canonical string:
//!
//!   ```text
//!   {t}\n
//!   idempotency-key:{value}\n
//!   x-xtimer-attempt:{value}\n
//!   x-xtimer-replay:{value}\n
//!   x-xtimer-run-time:{value}\n
//!   x-xtimer-scheduled-time:{value}\n
//!   x-xtimer-timer-id:{value}\n
//!   \n
//!   {body}
//!   ```
//!
//!   that is: `t`, a line feed, then one `name:value` line (each ending in
//!   a line feed) for each of the [`V2_HEADERS`] the request carries, names
//!   lower case and in that (sorted) order, values as sent without
//!   surrounding spaces or tabs; a header the request does not carry has no
//!   line (`X-Xtimer-Replay` is sent on replays only); then an empty line
//!   and the body. Changing, adding or removing any of those headers breaks
//!   `v2`.
//!
//! xtimer sends both: a receiver that checks only `v1` keeps working. A
//! receiver recomputes the HMAC with its secret, compares in constant time,
//! and refuses a `t` too far from its own clock so a captured request cannot
//! be replayed later. [`verify_fields`] checks `v2` when the header has one
//! (and then only `v2`: a request whose `v2` does not match is refused even
//! if its `v1` does), else `v1`, or insists on `v2` when asked (a request
//! stripped of its `v2` then fails too). [`verify`] and [`verify_any`] check
//! `v1` only, as before. While a secret is being rotated a header may carry
//! several entries of a version; any one matching is enough.
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

/// The headers `v2` signs, lower case, in their canonical (sorted) order.
pub const V2_HEADERS: [&str; 6] = [
    "idempotency-key",
    "x-xtimer-attempt",
    "x-xtimer-replay",
    "x-xtimer-run-time",
    "x-xtimer-scheduled-time",
    "x-xtimer-timer-id",
];

/// A signature scheme: which `vN` entry of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// `v1`: `t` and the body.
    V1,
    /// `v2`: `t`, the fire's headers ([`V2_HEADERS`]) and the body.
    V2,
}

type HmacSha256 = Hmac<Sha256>;

fn keyed(secret: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length, so this cannot fail.
    HmacSha256::new_from_slice(secret).expect("HMAC accepts any key length")
}

fn mac(secret: &[u8], t: i64, body: &[u8]) -> HmacSha256 {
    let mut mac = keyed(secret);
    mac.update(itoa::Buffer::new().format(t).as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

fn mac_v2(secret: &[u8], t: i64, fields: &[(&str, &str)], body: &[u8]) -> HmacSha256 {
    let mut mac = keyed(secret);
    canonical_parts(t, fields, body, |part| mac.update(part));
    mac
}

/// Feeds `v2`'s canonical string to `out`, part by part.
fn canonical_parts(t: i64, fields: &[(&str, &str)], body: &[u8], mut out: impl FnMut(&[u8])) {
    out(itoa::Buffer::new().format(t).as_bytes());
    out(b"\n");
    for name in V2_HEADERS {
        for (_, value) in fields.iter().filter(|(field, _)| field.eq_ignore_ascii_case(name)) {
            out(name.as_bytes());
            out(b":");
            out(value.trim_matches([' ', '\t']).as_bytes());
            out(b"\n");
        }
    }
    out(b"\n");
    out(body);
}

/// `v2`'s canonical string (see the [module](self) docs): `t`, the
/// `fields` among [`V2_HEADERS`] (names in any case; others are ignored)
/// and the body. Values hold no line breaks (header values cannot).
pub fn canonical_v2(t: i64, fields: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(160 + body.len());
    canonical_parts(t, fields, body, |part| out.extend_from_slice(part));
    out
}

/// The lower-case hex HMAC-SHA256 of `"{t}." + body` keyed with `secret` (`v1`).
pub fn sign(secret: &[u8], t: i64, body: &[u8]) -> String {
    hex64(mac(secret, t, body))
}

/// The lower-case hex HMAC-SHA256 of [`canonical_v2`] keyed with `secret` (`v2`).
pub fn sign_v2(secret: &[u8], t: i64, fields: &[(&str, &str)], body: &[u8]) -> String {
    hex64(mac_v2(secret, t, fields, body))
}

/// The header value `t={t},v1={sign(secret, t, body)}`: `v1` alone.
pub fn header_value(secret: &[u8], t: i64, body: &[u8]) -> String {
    let mut out = String::with_capacity(100);
    out.push_str("t=");
    out.push_str(itoa::Buffer::new().format(t));
    out.push_str(",v1=");
    out.push_str(&sign(secret, t, body));
    out
}

/// The header value xtimer sends: `t={t},v1={..},v2={..}`, `v2` over
/// `fields` (the request's [`V2_HEADERS`], name and value).
pub fn header_value_v2(secret: &[u8], t: i64, fields: &[(&str, &str)], body: &[u8]) -> String {
    let mut out = header_value(secret, t, body);
    out.reserve(68);
    out.push_str(",v2=");
    out.push_str(&sign_v2(secret, t, fields, body));
    out
}

/// A MAC's 32 bytes as 64 lower-case hex digits.
fn hex64(mac: HmacSha256) -> String {
    let mut hex = [0u8; 64];
    // 32 bytes of HMAC-SHA256 always fit 64 hex digits.
    hex::encode_to_slice(mac.finalize().into_bytes(), &mut hex).expect("64 hex digits");
    std::str::from_utf8(&hex).expect("hex digits are ASCII").to_owned()
}

/// Why a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// A header every callback carries is absent (its name).
    #[error("missing header {0}")]
    Missing(&'static str),
    /// The header is not `t=<secs>,v1=<hex>[,v2=<hex>...]`.
    #[error("malformed signature header: {0}")]
    Malformed(String),
    /// Another callback header is not what xtimer sends (say a timer id
    /// that is not a number, or one sent twice).
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
    /// No `v2` matches the body and headers under this secret: one of
    /// them was changed (or the secret is another).
    #[error("no v2 signature matches the body and headers")]
    MismatchV2,
    /// The verifier requires `v2` and the header has none.
    #[error("the signature header has no v2 entry, and v2 is required")]
    V2Required,
}

/// Checks a signature header against `body` and `secret` at `now_secs`
/// (Unix seconds): well-formed, `t` within `tolerance` of now, and some
/// `v1` equal (in constant time) to the HMAC of `"{t}." + body`. `v2` is
/// not looked at: see [`verify_fields`].
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
    let parsed = parse(header)?;
    if parsed.v1.is_empty() {
        return Err(VerifyError::Malformed("no v1=".into()));
    }
    fresh(parsed.t, tolerance, now_secs)?;
    match_v1(secrets, &parsed, body)
}

/// What [`verify_fields`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Accept {
    /// `v2` when the header has one, else `v1`.
    #[default]
    V2OrV1,
    /// `v2` only: a header without one is [`VerifyError::V2Required`].
    V2Only,
}

/// Checks a signature header against the request's `fields` (its
/// [`V2_HEADERS`], name and value, as received) and `body` with several
/// accepted secrets at `now_secs`: well-formed, `t` within `tolerance` of
/// now, and some `v2` matching when the header has any (else some `v1`,
/// unless `accept` is [`Accept::V2Only`]). Returns `t` and the version
/// that matched.
pub fn verify_fields<'a>(
    secrets: impl IntoIterator<Item = &'a [u8]>,
    header: &str,
    fields: &[(&str, &str)],
    body: &[u8],
    accept: Accept,
    tolerance: Duration,
    now_secs: i64,
) -> Result<(i64, Version), VerifyError> {
    let parsed = parse(header)?;
    if parsed.v1.is_empty() && parsed.v2.is_empty() {
        return Err(VerifyError::Malformed("no v1= or v2=".into()));
    }
    if parsed.v2.is_empty() && accept == Accept::V2Only {
        return Err(VerifyError::V2Required);
    }
    fresh(parsed.t, tolerance, now_secs)?;
    if parsed.v2.is_empty() {
        return match_v1(secrets, &parsed, body).map(|t| (t, Version::V1));
    }
    for secret in secrets {
        let expected = mac_v2(secret, parsed.t, fields, body);
        if parsed.v2.iter().any(|c| expected.clone().verify_slice(c).is_ok()) {
            return Ok((parsed.t, Version::V2));
        }
    }
    Err(VerifyError::MismatchV2)
}

fn fresh(t: i64, tolerance: Duration, now_secs: i64) -> Result<(), VerifyError> {
    let skew_secs = now_secs.abs_diff(t);
    if skew_secs > tolerance.as_secs() {
        return Err(VerifyError::Stale { t, skew_secs, tolerance_secs: tolerance.as_secs() });
    }
    Ok(())
}

fn match_v1<'a>(secrets: impl IntoIterator<Item = &'a [u8]>, parsed: &Parsed, body: &[u8]) -> Result<i64, VerifyError> {
    for secret in secrets {
        let expected = mac(secret, parsed.t, body);
        if parsed.v1.iter().any(|c| expected.clone().verify_slice(c).is_ok()) {
            return Ok(parsed.t);
        }
    }
    Err(VerifyError::Mismatch)
}

/// A signature header: its `t` and its `v1` and `v2` signatures, decoded.
struct Parsed {
    t: i64,
    v1: Vec<Vec<u8>>,
    v2: Vec<Vec<u8>>,
}

fn parse(header: &str) -> Result<Parsed, VerifyError> {
    let mut t = None;
    let (mut v1, mut v2) = (Vec::new(), Vec::new());
    for part in header.split(',') {
        let (key, value) =
            part.trim().split_once('=').ok_or_else(|| VerifyError::Malformed(format!("`{part}` is not key=value")))?;
        let list = match key {
            "t" => {
                let secs = value
                    .parse::<i64>()
                    .map_err(|_| VerifyError::Malformed(format!("t `{value}` is not Unix seconds")))?;
                t = Some(secs);
                continue;
            }
            "v1" => &mut v1,
            "v2" => &mut v2,
            // Other schemes (v0, future versions) are ignored, as Stripe does.
            _ => continue,
        };
        match hex::decode(value) {
            Ok(bytes) => list.push(bytes),
            Err(_) => return Err(VerifyError::Malformed(format!("{key} `{value}` is not hex"))),
        }
    }
    let t = t.ok_or_else(|| VerifyError::Malformed("no t=".into()))?;
    Ok(Parsed { t, v1, v2 })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec_test";
    const NOW: i64 = 1_767_225_600;
    const FIELDS: [(&str, &str); 5] = [
        ("X-Xtimer-Timer-Id", "42"),
        ("Idempotency-Key", "42_1767225600000"),
        ("X-Xtimer-Run-Time", "1767225600250"),
        ("X-Xtimer-Scheduled-Time", "1767225600000"),
        ("X-Xtimer-Attempt", "1"),
    ];

    fn check(header: &str, fields: &[(&str, &str)], body: &[u8], accept: Accept) -> Result<Version, VerifyError> {
        verify_fields([SECRET], header, fields, body, accept, DEFAULT_TOLERANCE, NOW).map(|(_, v)| v)
    }

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
    fn v2_signs_the_documented_canonical_string() {
        let mut fields = FIELDS.to_vec();
        fields.push(("x-xtimer-replay", " 1\t"));
        fields.push(("content-type", "application/json"));
        let canonical = canonical_v2(NOW, &fields, b"{\"a\":1}");
        let expected = "1767225600\n\
                        idempotency-key:42_1767225600000\n\
                        x-xtimer-attempt:1\n\
                        x-xtimer-replay:1\n\
                        x-xtimer-run-time:1767225600250\n\
                        x-xtimer-scheduled-time:1767225600000\n\
                        x-xtimer-timer-id:42\n\
                        \n\
                        {\"a\":1}";
        assert_eq!(String::from_utf8(canonical.clone()).unwrap(), expected);
        let mut mac = HmacSha256::new_from_slice(SECRET).unwrap();
        mac.update(&canonical);
        assert_eq!(sign_v2(SECRET, NOW, &fields, b"{\"a\":1}"), hex::encode(mac.finalize().into_bytes()));
        // Absent headers have no line; the empty line still ends the list.
        assert_eq!(canonical_v2(NOW, &[], b""), b"1767225600\n\n");
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
    fn v2_covers_the_headers_and_v1_still_verifies_alone() {
        let body = b"{\"a\":1}";
        let header = header_value_v2(SECRET, NOW, &FIELDS, body);
        let (v1, v2) = header.strip_prefix("t=1767225600,v1=").unwrap().split_once(",v2=").unwrap();
        assert_eq!((v1, v2), (sign(SECRET, NOW, body).as_str(), sign_v2(SECRET, NOW, &FIELDS, body).as_str()));
        assert_eq!(check(&header, &FIELDS, body, Accept::V2OrV1), Ok(Version::V2));
        assert_eq!(check(&header, &FIELDS, body, Accept::V2Only), Ok(Version::V2));
        // A v1-only receiver reads the same header as before.
        assert_eq!(verify(SECRET, &header, body, DEFAULT_TOLERANCE, NOW), Ok(()));

        let changed = |name: &str, value: &'static str| {
            let mut fields = FIELDS.to_vec();
            fields.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            fields.push((Box::leak(name.to_owned().into_boxed_str()), value));
            check(&header, &fields, body, Accept::V2OrV1)
        };
        for (name, value) in [
            ("idempotency-key", "42_1767225601000"),
            ("x-xtimer-attempt", "2"),
            ("x-xtimer-timer-id", "43"),
            ("x-xtimer-run-time", "1767225600251"),
            ("x-xtimer-scheduled-time", "0"),
            ("x-xtimer-replay", "1"),
        ] {
            assert_eq!(changed(name, value), Err(VerifyError::MismatchV2), "{name}: {value}");
        }
        let without: Vec<_> = FIELDS.iter().copied().filter(|(n, _)| *n != "X-Xtimer-Attempt").collect();
        assert_eq!(check(&header, &without, body, Accept::V2OrV1), Err(VerifyError::MismatchV2));
        assert_eq!(check(&header, &FIELDS, b"{\"a\":2}", Accept::V2OrV1), Err(VerifyError::MismatchV2));
        // Names match in any case; other headers are not signed.
        let mut fields: Vec<_> = FIELDS.iter().map(|&(n, v)| (n, v)).collect();
        fields.push(("User-Agent", "anything"));
        assert_eq!(check(&header, &fields, body, Accept::V2OrV1), Ok(Version::V2));
    }

    #[test]
    fn a_v2_header_is_held_to_v2_and_a_v1_one_only_when_allowed() {
        let body = b"x";
        let v1_only = header_value(SECRET, NOW, body);
        assert_eq!(check(&v1_only, &FIELDS, body, Accept::V2OrV1), Ok(Version::V1));
        assert_eq!(check(&v1_only, &[], body, Accept::V2OrV1), Ok(Version::V1), "v1 ignores the headers");
        assert_eq!(check(&v1_only, &FIELDS, body, Accept::V2Only), Err(VerifyError::V2Required));
        // A good v1 does not rescue a bad v2: the headers were changed.
        let header = header_value_v2(SECRET, NOW, &FIELDS, body);
        assert_eq!(check(&header, &FIELDS[1..], body, Accept::V2OrV1), Err(VerifyError::MismatchV2));
        // v2 alone is well formed for a v2-aware verifier, not for v1's.
        let alone = format!("t={NOW},v2={}", sign_v2(SECRET, NOW, &FIELDS, body));
        assert_eq!(check(&alone, &FIELDS, body, Accept::V2OrV1), Ok(Version::V2));
        let err = verify(SECRET, &alone, body, DEFAULT_TOLERANCE, NOW).unwrap_err();
        assert!(matches!(err, VerifyError::Malformed(_)), "{err}");
        // Any of several v2 entries and secrets; staleness as for v1.
        let rotating = format!("t={NOW},v2={},v2={}", "00".repeat(32), sign_v2(b"old", NOW, &FIELDS, body));
        let secrets: [&[u8]; 2] = [b"new", b"old"];
        let got = verify_fields(secrets, &rotating, &FIELDS, body, Accept::V2Only, DEFAULT_TOLERANCE, NOW);
        assert_eq!(got, Ok((NOW, Version::V2)));
        let got = verify_fields([SECRET], &header, &FIELDS, body, Accept::V2OrV1, DEFAULT_TOLERANCE, NOW + 301);
        assert!(matches!(got, Err(VerifyError::Stale { skew_secs: 301, .. })), "{got:?}");
        let err = check(&format!("t={NOW},v2=zz"), &FIELDS, body, Accept::V2OrV1).unwrap_err();
        assert_eq!(err, VerifyError::Malformed("v2 `zz` is not hex".into()));
        let err = check(&format!("t={NOW},v0=00"), &FIELDS, body, Accept::V2OrV1).unwrap_err();
        assert_eq!(err, VerifyError::Malformed("no v1= or v2=".into()));
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
