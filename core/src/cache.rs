//! [`TtlCache`]: the one cache every part uses for values read from the
//! database and reused for a while (timers, signing secrets, API tokens,
//! task type configs).
//!
//! It is bounded and reads the injected [`Clock`](crate::Clock), so it
//! never grows with the number of timers and tests drive its expiry on a
//! [`ManualClock`](crate::clock::ManualClock).
//!
//! # How it evicts
//!
//! Every entry lives for the cache's one `ttl` from its insert. Entries
//! are kept in insert order beside the map, so the oldest entry is also the
//! first to expire. A lookup never returns an expired entry, but it does
//! not drop it either: [`TtlCache::get_stale`] still finds it, for a caller
//! that would rather use an old value than none when the database fails.
//! Room is made only when an insert finds the cache full: expired entries
//! go first (from the old end), and if none has expired, the oldest entry
//! goes. Each operation is a short critical section under one mutex and
//! costs O(log n); nothing scans the whole cache.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use crate::SharedClock;

/// A bounded map whose entries expire `ttl` after their insert, on an
/// injected clock. Thread-safe; share it behind an `Arc` or inside a
/// struct that is.
pub struct TtlCache<K, V> {
    capacity: usize,
    ttl_ms: i64,
    clock: SharedClock,
    state: Mutex<State<K, V>>,
}

struct State<K, V> {
    entries: HashMap<K, Entry<V>>,
    /// Insert sequence number -> key, oldest first.
    order: BTreeMap<u64, K>,
    next_seq: u64,
}

struct Entry<V> {
    value: V,
    inserted_ms: i64,
    seq: u64,
}

impl<K, V> TtlCache<K, V>
where
    K: Eq + Hash + Clone,
    V: Clone,
{
    /// A cache of at most `capacity` entries (at least one), each fresh for
    /// `ttl` after its insert, as `clock` tells time.
    pub fn new(capacity: usize, ttl: Duration, clock: SharedClock) -> Self {
        Self {
            capacity: capacity.max(1),
            ttl_ms: i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX),
            clock,
            state: Mutex::new(State { entries: HashMap::new(), order: BTreeMap::new(), next_seq: 0 }),
        }
    }

    /// The value of `key`, unless it is missing or expired.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let now = self.clock.now_ms();
        let state = self.lock();
        let entry = state.entries.get(key)?;
        self.fresh(entry, now).then(|| entry.value.clone())
    }

    /// The value of `key` even if it has expired, as long as the cache
    /// still holds it: the last known value, for when reading afresh failed.
    pub fn get_stale<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.lock().entries.get(key).map(|entry| entry.value.clone())
    }

    /// Whether `key` has a fresh value.
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let now = self.clock.now_ms();
        let state = self.lock();
        state.entries.get(key).is_some_and(|entry| self.fresh(entry, now))
    }

    /// Stores `value` for `key`, fresh for the cache's ttl from now. When
    /// the cache is full, expired entries are dropped first, then the oldest.
    pub fn insert(&self, key: K, value: V) {
        let now = self.clock.now_ms();
        let mut state = self.lock();
        let seq = state.next_seq;
        state.next_seq += 1;
        if let Some(old) = state.entries.remove(&key) {
            state.order.remove(&old.seq);
        }
        if state.entries.len() >= self.capacity {
            self.make_room(&mut state, now);
        }
        state.order.insert(seq, key.clone());
        state.entries.insert(key, Entry { value, inserted_ms: now, seq });
    }

    /// Forgets `key` (after this node changed what it caches).
    pub fn invalidate<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut state = self.lock();
        if let Some(old) = state.entries.remove(key) {
            state.order.remove(&old.seq);
        }
    }

    /// Removes `key` and returns its value, unless it is missing or expired
    /// (an expired value is dropped all the same).
    pub fn take<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let now = self.clock.now_ms();
        let mut state = self.lock();
        let entry = state.entries.remove(key)?;
        state.order.remove(&entry.seq);
        self.fresh(&entry, now).then_some(entry.value)
    }

    /// Drops every expired entry now (inserts only drop them when the
    /// cache is full); returns how many went.
    pub fn purge_expired(&self) -> usize {
        let now = self.clock.now_ms();
        self.drop_expired(&mut self.lock(), now)
    }

    /// Entries held, fresh or expired but not yet dropped.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether the cache holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most entries the cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn fresh(&self, entry: &Entry<V>, now: i64) -> bool {
        now.saturating_sub(entry.inserted_ms) < self.ttl_ms
    }

    /// Drops expired entries; if none had expired, drops the oldest one.
    fn make_room(&self, state: &mut State<K, V>, now: i64) {
        if self.drop_expired(state, now) == 0 {
            if let Some((_, key)) = state.order.pop_first() {
                state.entries.remove(&key);
            }
        }
    }

    /// Drops expired entries from the old end; returns how many went.
    /// Insert order is expiry order (one ttl for all), so the expired
    /// entries are at the old end; a clock that stepped back only makes
    /// this drop fewer of them.
    fn drop_expired(&self, state: &mut State<K, V>, now: i64) -> usize {
        let mut dropped = 0;
        while let Some((&seq, key)) = state.order.first_key_value() {
            if state.entries.get(key).is_some_and(|entry| self.fresh(entry, now)) {
                break;
            }
            let key = state.order.remove(&seq).expect("present");
            state.entries.remove(&key);
            dropped += 1;
        }
        dropped
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K, V>> {
        // A panic while holding the lock leaves the maps consistent (every
        // step above is a whole map operation), so a poisoned lock is safe
        // to keep using.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<K, V> std::fmt::Debug for TtlCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtlCache").field("capacity", &self.capacity).field("ttl_ms", &self.ttl_ms).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;

    fn cache(capacity: usize, ttl_ms: u64) -> (TtlCache<String, u32>, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_000_000));
        (TtlCache::new(capacity, Duration::from_millis(ttl_ms), clock.clone()), clock)
    }

    #[test]
    fn an_entry_is_fresh_for_its_ttl_then_expires() {
        let (cache, clock) = cache(10, 1_000);
        cache.insert("a".into(), 1);
        assert_eq!(cache.get("a"), Some(1));
        clock.advance(999);
        assert_eq!(cache.get("a"), Some(1));
        assert!(cache.contains("a"));
        clock.advance(1);
        assert_eq!(cache.get("a"), None);
        assert!(!cache.contains("a"));
        // Expired but still held: the last known value.
        assert_eq!(cache.get_stale("a"), Some(1));
        assert_eq!(cache.get("missing"), None);
    }

    #[test]
    fn inserting_again_restarts_the_ttl() {
        let (cache, clock) = cache(10, 1_000);
        cache.insert("a".into(), 1);
        clock.advance(800);
        cache.insert("a".into(), 2);
        clock.advance(800);
        assert_eq!(cache.get("a"), Some(2));
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_full_cache_drops_the_oldest_entry() {
        let (cache, clock) = cache(3, 60_000);
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            cache.insert(key.into(), i as u32);
            clock.advance(1);
        }
        cache.insert("d".into(), 3);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("a"), None, "the oldest made room");
        assert_eq!(cache.get("b"), Some(1));
        assert_eq!(cache.get("d"), Some(3));
    }

    #[test]
    fn a_full_cache_drops_every_expired_entry_before_a_fresh_one() {
        let (cache, clock) = cache(4, 1_000);
        cache.insert("a".into(), 0);
        cache.insert("b".into(), 1);
        clock.advance(500);
        cache.insert("c".into(), 2);
        cache.insert("d".into(), 3);
        clock.advance(600); // a and b expired; c and d fresh
        cache.insert("e".into(), 4);
        assert_eq!(cache.len(), 3, "both expired entries went, no fresh one");
        assert_eq!(cache.get_stale("a"), None);
        assert_eq!(cache.get_stale("b"), None);
        assert_eq!(cache.get("c"), Some(2));
        assert_eq!(cache.get("d"), Some(3));
        assert_eq!(cache.get("e"), Some(4));
    }

    #[test]
    fn the_cache_never_holds_more_than_its_capacity() {
        let (cache, clock) = cache(100, 10_000);
        for i in 0..10_000u32 {
            cache.insert(format!("k{i}"), i);
            if i % 7 == 0 {
                clock.advance(3);
            }
            assert!(cache.len() <= 100);
        }
        assert_eq!(cache.len(), 100);
        assert_eq!(cache.get("k9999"), Some(9_999));
        assert_eq!(cache.get("k0"), None);
    }

    #[test]
    fn invalidate_forgets_a_key() {
        let (cache, _clock) = cache(2, 1_000);
        cache.insert("a".into(), 1);
        cache.insert("b".into(), 2);
        cache.invalidate("a");
        assert_eq!(cache.get("a"), None);
        assert_eq!(cache.get_stale("a"), None);
        assert_eq!(cache.len(), 1);
        cache.invalidate("never there");
        // The freed slot is used without dropping b.
        cache.insert("c".into(), 3);
        assert_eq!(cache.get("b"), Some(2));
        assert_eq!(cache.get("c"), Some(3));
    }

    #[test]
    fn take_removes_a_fresh_value_and_returns_it() {
        let (cache, clock) = cache(10, 1_000);
        cache.insert("a".into(), 1);
        cache.insert("b".into(), 2);
        assert_eq!(cache.take("a"), Some(1));
        assert_eq!(cache.take("a"), None, "taken once");
        assert_eq!(cache.len(), 1);
        clock.advance(1_000);
        assert_eq!(cache.take("b"), None, "expired: dropped, not returned");
        assert!(cache.is_empty());
    }

    #[test]
    fn purge_expired_drops_only_what_has_expired() {
        let (cache, clock) = cache(10, 1_000);
        cache.insert("a".into(), 1);
        clock.advance(600);
        cache.insert("b".into(), 2);
        assert_eq!(cache.purge_expired(), 0);
        clock.advance(400);
        assert_eq!(cache.purge_expired(), 1);
        assert_eq!(cache.get_stale("a"), None);
        assert_eq!(cache.get("b"), Some(2));
        clock.advance(600);
        assert_eq!(cache.purge_expired(), 1);
        assert!(cache.is_empty());
    }

    #[test]
    fn the_cache_is_shared_between_threads() {
        let clock = Arc::new(ManualClock::new(0));
        let cache = Arc::new(TtlCache::<u64, u64>::new(1_000, Duration::from_secs(60), clock));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        cache.insert(t * 10_000 + i, i);
                        let _ = cache.get(&(t * 10_000 + i / 2));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(cache.len(), 1_000);
    }
}
