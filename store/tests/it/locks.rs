//! `LockStore` conformance: `SET NX PX` with owner tokens.

use crate::helpers::Backend;

const KEY: &str = "conformance:lock:2026-03-01 12:34:3";

pub async fn acquire_is_exclusive_until_the_lease_expires(b: Backend) {
    assert!(b.locks.acquire(KEY, "a", 1_000).await.unwrap());
    assert!(!b.locks.acquire(KEY, "b", 1_000).await.unwrap());
    assert!(!b.locks.acquire(KEY, "a", 1_000).await.unwrap(), "not re-entrant: NX even for the holder");
    b.clock.advance(999);
    assert!(!b.locks.acquire(KEY, "b", 1_000).await.unwrap(), "still held just before expiry");
    b.clock.advance(2);
    assert!(b.locks.acquire(KEY, "b", 1_000).await.unwrap(), "free once the lease ran out");
    assert!(!b.locks.acquire(KEY, "a", 1_000).await.unwrap(), "and now b's");
}

pub async fn only_the_owner_extends_or_releases(b: Backend) {
    assert!(b.locks.acquire(KEY, "a", 1_000).await.unwrap());
    assert!(!b.locks.extend(KEY, "b", 60_000).await.unwrap());
    assert!(!b.locks.release(KEY, "b").await.unwrap());
    assert!(b.locks.extend(KEY, "a", 5_000).await.unwrap());
    b.clock.advance(3_000);
    assert!(!b.locks.acquire(KEY, "b", 1_000).await.unwrap(), "extended past the first lease");
    assert!(b.locks.release(KEY, "a").await.unwrap());
    assert!(!b.locks.release(KEY, "a").await.unwrap(), "released once");
    assert!(b.locks.acquire(KEY, "b", 1_000).await.unwrap(), "free at once after release");
    assert!(!b.locks.release(KEY, "a").await.unwrap(), "the old owner cannot release the new one's lock");
    assert!(!b.locks.extend(KEY, "a", 1_000).await.unwrap());
    assert!(!b.locks.acquire(KEY, "c", 1_000).await.unwrap(), "b still holds it");
}

pub async fn expired_lock_cannot_be_extended_or_released(b: Backend) {
    assert!(b.locks.acquire(KEY, "a", 1_000).await.unwrap());
    b.clock.advance(1_001);
    assert!(!b.locks.extend(KEY, "a", 10_000).await.unwrap(), "an expired lease is not revived");
    assert!(!b.locks.release(KEY, "a").await.unwrap());
    assert!(b.locks.acquire(KEY, "b", 1_000).await.unwrap());
    assert!(!b.locks.extend(KEY, "a", 10_000).await.unwrap());
}

pub async fn extend_with_a_long_ttl_is_the_done_marker(b: Backend) {
    // The scheduler's shard lock: a short lease while the trigger works,
    // then the done marker (> 2 minutes) so the previous-minute pass skips it.
    assert!(b.locks.acquire(KEY, "a", 10_000).await.unwrap());
    b.clock.advance(9_000);
    assert!(b.locks.extend(KEY, "a", 130_000).await.unwrap());
    let marked = b.now();
    b.clock.advance(70_000);
    assert!(!b.locks.acquire(KEY, "b", 10_000).await.unwrap(), "a finished shard is not taken again");
    assert!(!b.locks.extend(KEY, "b", 10_000).await.unwrap());
    b.clock.set(marked + 129_999);
    assert!(!b.locks.acquire(KEY, "b", 10_000).await.unwrap());
    b.clock.set(marked + 130_001);
    assert!(b.locks.acquire(KEY, "b", 10_000).await.unwrap(), "the marker expires like any lease");
}

pub async fn locks_on_different_keys_are_independent(b: Backend) {
    let other = "conformance:lock:2026-03-01 12:34:4";
    assert!(b.locks.acquire(KEY, "a", 1_000).await.unwrap());
    assert!(b.locks.acquire(other, "b", 5_000).await.unwrap());
    assert!(!b.locks.release(other, "a").await.unwrap());
    assert!(!b.locks.release(KEY, "b").await.unwrap());
    b.clock.advance(2_000);
    assert!(b.locks.acquire(KEY, "c", 1_000).await.unwrap(), "the first key expired");
    assert!(!b.locks.acquire(other, "c", 1_000).await.unwrap(), "the second did not");
    assert!(b.locks.release(other, "b").await.unwrap());
}
