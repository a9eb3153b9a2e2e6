//! `ShardStore` conformance.

use xtimer_core::fire::FireKey;
use xtimer_core::shard::{bucket_of, ShardKey, MINUTE_MS};
use xtimer_store::shard::SHARD_TTL_MS;

use crate::helpers::{Backend, T0};

fn fk(timer_id: i64, run_ms: i64) -> FireKey {
    FireKey { timer_id, run_ms }
}

/// The shard of `timer_id`'s fire at `run_ms` in this backend.
fn shard(b: &Backend, timer_id: i64, run_ms: i64) -> ShardKey {
    ShardKey::of(timer_id, run_ms, b.shards.buckets())
}

/// Everything in the shard of `timer_id`'s fires in the minute of `run_ms`.
async fn whole(b: &Backend, timer_id: i64, run_ms: i64) -> Vec<FireKey> {
    let s = shard(b, timer_id, run_ms);
    b.shards.range(s, s.minute_ms, s.end_ms()).await.unwrap()
}

/// The first id after `after` whose bucket is (`same`) or is not the bucket of `after`.
fn neighbour(b: &Backend, after: i64, same: bool) -> i64 {
    let buckets = b.shards.buckets();
    (after + 1..after + 10_000).find(|&id| (bucket_of(id, buckets) == bucket_of(after, buckets)) == same).unwrap()
}

pub async fn add_is_idempotent(b: Backend) {
    let k = fk(7, T0 + 1_500);
    b.shards.add(&[k]).await.unwrap();
    b.shards.add(&[k, k]).await.unwrap();
    b.shards.add(&[]).await.unwrap();
    assert_eq!(whole(&b, 7, k.run_ms).await, vec![k]);
}

pub async fn range_is_half_open_and_ordered_by_run_time(b: Backend) {
    let t = 7;
    let offsets = [30_000, 1_000, 59_999, 0, 15_500];
    b.shards.add(&offsets[..2].iter().map(|&o| fk(t, T0 + o)).collect::<Vec<_>>()).await.unwrap();
    b.shards.add(&offsets[2..].iter().map(|&o| fk(t, T0 + o)).collect::<Vec<_>>()).await.unwrap();
    let s = shard(&b, t, T0);
    let offs = |keys: Vec<FireKey>| keys.iter().map(|k| k.run_ms - T0).collect::<Vec<_>>();

    assert_eq!(offs(b.shards.range(s, T0, T0 + MINUTE_MS).await.unwrap()), vec![0, 1_000, 15_500, 30_000, 59_999]);
    assert_eq!(offs(b.shards.range(s, T0 + 1_000, T0 + 30_000).await.unwrap()), vec![1_000, 15_500], "[from, to)");
    assert!(b.shards.range(s, T0 + 30_001, T0 + 59_999).await.unwrap().is_empty());

    // Another timer of the same bucket shares the shard; ties in run time
    // may come in any order, but run times never go backwards.
    let mate = neighbour(&b, t, true);
    assert_eq!(shard(&b, mate, T0), s);
    b.shards.add(&[fk(mate, T0 + 15_500), fk(mate, T0 + 45_000)]).await.unwrap();
    let got = b.shards.range(s, T0, T0 + MINUTE_MS).await.unwrap();
    assert!(got.windows(2).all(|w| w[0].run_ms <= w[1].run_ms), "{got:?}");
    let mut sorted = got.clone();
    sorted.sort();
    let mut expected: Vec<FireKey> = offsets.iter().map(|&o| fk(t, T0 + o)).collect();
    expected.extend([fk(mate, T0 + 15_500), fk(mate, T0 + 45_000)]);
    expected.sort();
    assert_eq!(sorted, expected);
}

pub async fn shards_separate_buckets_and_minutes(b: Backend) {
    let buckets = b.shards.buckets();
    assert!(buckets >= 2, "the conformance backends spread fires over several buckets");
    let a = 11;
    let other = neighbour(&b, a, false);
    assert!(shard(&b, a, T0).bucket < buckets && shard(&b, other, T0).bucket < buckets);
    let (a_now, other_now, a_next) = (fk(a, T0 + 1_000), fk(other, T0 + 2_000), fk(a, T0 + MINUTE_MS + 1_000));
    b.shards.add(&[a_next, other_now, a_now]).await.unwrap();

    assert_eq!(whole(&b, a, T0).await, vec![a_now]);
    assert_eq!(whole(&b, other, T0).await, vec![other_now]);
    assert_eq!(whole(&b, a, a_next.run_ms).await, vec![a_next]);
    assert!(whole(&b, other, a_next.run_ms).await.is_empty());
}

pub async fn old_shards_expire(b: Backend) {
    let old = fk(7, T0 + 1_000);
    b.shards.add(&[old]).await.unwrap();
    let expiry = T0 + MINUTE_MS + SHARD_TTL_MS; // the minute's end plus the TTL

    b.clock.set(expiry - 1);
    let fresh = fk(8, b.now());
    b.shards.add(&[fresh]).await.unwrap();
    assert_eq!(whole(&b, 7, old.run_ms).await, vec![old], "kept until the TTL has run");

    b.clock.set(expiry + 1);
    let fresher = fk(9, b.now());
    b.shards.add(&[fresher]).await.unwrap();
    assert!(whole(&b, 7, old.run_ms).await.is_empty(), "gone once the TTL has run");
    assert_eq!(whole(&b, 9, fresher.run_ms).await, vec![fresher], "recent shards stay");
    b.shards.add(&[old]).await.unwrap();
    assert!(whole(&b, 7, old.run_ms).await.is_empty(), "adding to an expired shard does not revive it");
}

pub async fn expired_shard_reads_empty_without_further_writes(b: Backend) {
    let old = fk(7, T0 + 1_000);
    b.shards.add(&[old]).await.unwrap();
    b.clock.set(T0 + MINUTE_MS + SHARD_TTL_MS + 1);
    assert!(whole(&b, 7, old.run_ms).await.is_empty(), "an expired shard reads empty, as a Redis key past its TTL");
}
