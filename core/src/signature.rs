//! Signed callbacks (the `X-Xtimer-Signature` header, `v1` over the body,
//! `v2` over the body and the fire's headers) and the secrets behind them.
//!
//! Signing and verifying live in the `xtimer-receiver` crate, which
//! receivers use too, so both sides share one implementation; they are
//! re-exported here. This module adds what only the server needs: fresh
//! random secrets and the hash tokens are stored as.

pub use xtimer_receiver::signature::{
    canonical_v2, header_value, header_value_v2, sign, sign_v2, verify, verify_any, verify_fields, Accept, VerifyError,
    Version, DEFAULT_TOLERANCE, HEADER, V2_HEADERS,
};

use sha2::Sha256;

/// A fresh random secret (32 bytes from the OS's generator, as 64 hex
/// characters), for app signing secrets and API tokens.
pub fn random_secret() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom(&mut bytes)?;
    Ok(hex::encode(bytes))
}

fn getrandom(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// SHA-256 of `text`, hex: how API tokens are stored (tokens are 256 random
/// bits, so a fast hash loses nothing to guessing).
pub fn token_hash(text: &str) -> String {
    use sha2::Digest;
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_and_hashes_are_stable() {
        let (a, b) = (random_secret().unwrap(), random_secret().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert_eq!(token_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
