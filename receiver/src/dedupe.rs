//! Handling each fire once: a store of the `Idempotency-Key`s already
//! handled, and [`dedupe`], which answers a repeat with 409.
//!
//! xtimer sends a fire again after a timeout, a 5xx or a lost connection
//! (each retry with the same key), and `replayFires` sends old fires again
//! on purpose; a node that dies mid-request leaves its fire to another.
//! A receiver whose work must happen once records each key it handled and
//! answers **409** to one it has seen: xtimer counts a 409 as succeeded
//! ("already done") and does not send that fire again.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::Callback;

/// Where a receiver keeps the keys it has handled: a database table with a
/// unique key, a Redis `SET key NX EX`, or [`MemorySeen`] for one process.
pub trait SeenKeys: Send + Sync {
    /// Records `key` and answers whether it is new: true the first time,
    /// false for a key recorded before (and still remembered). Two
    /// concurrent calls with one key must not both answer true.
    fn first_time(&self, key: &str) -> impl Future<Output = bool> + Send;

    /// Forgets `key`, so that its next delivery is handled again: call it
    /// when handling a new key failed and the answer asks xtimer to retry
    /// (a 5xx). Does nothing by default.
    fn forget(&self, key: &str) -> impl Future<Output = ()> + Send {
        let _ = key;
        std::future::ready(())
    }
}

impl<T: SeenKeys> SeenKeys for Arc<T> {
    fn first_time(&self, key: &str) -> impl Future<Output = bool> + Send {
        (**self).first_time(key)
    }

    fn forget(&self, key: &str) -> impl Future<Output = ()> + Send {
        (**self).forget(key)
    }
}

impl<T: SeenKeys> SeenKeys for &T {
    fn first_time(&self, key: &str) -> impl Future<Output = bool> + Send {
        (**self).first_time(key)
    }

    fn forget(&self, key: &str) -> impl Future<Output = ()> + Send {
        (**self).forget(key)
    }
}

/// A fire already handled: its `Idempotency-Key`. As an axum response
/// (feature `axum`) it is a **409** with a short text, which xtimer records
/// as succeeded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("already done: {key}")]
pub struct Repeat {
    /// The repeated `Idempotency-Key`.
    pub key: String,
}

/// `Ok` the first time `store` sees the callback's `Idempotency-Key`, a
/// [`Repeat`] (409) after that. Takes a [`Callback`] or a
/// [`Signed`](crate::Signed).
pub async fn dedupe<S: SeenKeys>(store: &S, callback: &impl AsRef<Callback>) -> Result<(), Repeat> {
    let key = &callback.as_ref().idempotency_key;
    if store.first_time(key).await {
        Ok(())
    } else {
        Err(Repeat { key: key.clone() })
    }
}

/// [`SeenKeys`] in this process's memory: at most `capacity` keys, each
/// remembered for `ttl` (the oldest are dropped first when full). Lost on
/// a restart and not shared between replicas; use a shared store when
/// either matters.
pub struct MemorySeen {
    capacity: usize,
    ttl: Duration,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Key to (its entry's number, when it was recorded).
    keys: HashMap<String, (u64, Instant)>,
    /// Entries oldest first; one whose number no longer matches `keys`
    /// was forgotten (or recorded again) and is skipped.
    order: VecDeque<(String, u64)>,
    next: u64,
}

impl Default for MemorySeen {
    /// 100,000 keys for 24 hours: longer than xtimer retries one fire.
    fn default() -> Self {
        Self::new(100_000, Duration::from_secs(24 * 3600))
    }
}

impl MemorySeen {
    /// Remembers at most `capacity` keys (at least 1), each for `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Self { capacity: capacity.max(1), ttl, inner: Mutex::default() }
    }

    /// How many keys it remembers now (expired ones count until the next
    /// [`first_time`](SeenKeys::first_time) drops them).
    pub fn len(&self) -> usize {
        self.lock().keys.len()
    }

    /// Whether it remembers no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The map is consistent after every statement: a panic elsewhere
        // while it was held leaves nothing half done.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn first_time_at(&self, key: &str, now: Instant) -> bool {
        let mut guard = self.lock();
        let inner = &mut *guard;
        // Drop the expired and the forgotten from the front.
        while let Some((oldest, number)) = inner.order.front() {
            let live = match inner.keys.get(oldest) {
                Some(&(n, at)) if n == *number => Some(at),
                _ => None,
            };
            match live {
                Some(at) if now.saturating_duration_since(at) < self.ttl => break,
                Some(_) => {
                    let (oldest, _) = inner.order.pop_front().expect("a front entry");
                    inner.keys.remove(&oldest);
                }
                None => {
                    inner.order.pop_front();
                }
            }
        }
        if inner.keys.contains_key(key) {
            return false;
        }
        let number = inner.next;
        inner.next += 1;
        inner.keys.insert(key.to_owned(), (number, now));
        inner.order.push_back((key.to_owned(), number));
        while inner.order.len() > self.capacity {
            let (oldest, n) = inner.order.pop_front().expect("over capacity");
            if inner.keys.get(&oldest).is_some_and(|&(number, _)| number == n) {
                inner.keys.remove(&oldest);
            }
        }
        true
    }
}

impl SeenKeys for MemorySeen {
    fn first_time(&self, key: &str) -> impl Future<Output = bool> + Send {
        std::future::ready(self.first_time_at(key, Instant::now()))
    }

    fn forget(&self, key: &str) -> impl Future<Output = ()> + Send {
        self.lock().keys.remove(key);
        std::future::ready(())
    }
}

impl std::fmt::Debug for MemorySeen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySeen")
            .field("capacity", &self.capacity)
            .field("ttl", &self.ttl)
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn callback(key: &str) -> Callback {
        Callback {
            timer_id: 1,
            run_time_ms: 0,
            scheduled_time_ms: 0,
            idempotency_key: key.into(),
            signed_at: 0,
            replay: false,
        }
    }

    fn block_on<F: Future>(future: F) -> F::Output {
        // The memory store's futures are ready at once.
        let mut future = std::pin::pin!(future);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match future.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(out) => out,
            std::task::Poll::Pending => panic!("the memory store never waits"),
        }
    }

    #[test]
    fn a_key_passes_once_then_is_a_repeat_until_forgotten() {
        let seen = MemorySeen::default();
        assert_eq!(block_on(dedupe(&seen, &callback("7_1000"))), Ok(()));
        assert_eq!(block_on(dedupe(&seen, &callback("7_2000"))), Ok(()));
        assert_eq!(block_on(dedupe(&seen, &callback("7_1000"))), Err(Repeat { key: "7_1000".into() }));
        block_on(seen.forget("7_1000"));
        let shared = Arc::new(seen);
        assert_eq!(block_on(dedupe(&shared, &callback("7_1000"))), Ok(()), "handled again after forget");
        assert!(block_on(dedupe(&shared, &callback("7_1000"))).is_err());
        assert_eq!(shared.len(), 2);
    }

    #[test]
    fn keys_expire_after_the_ttl() {
        let seen = MemorySeen::new(10, Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(seen.first_time_at("a", t0));
        assert!(seen.first_time_at("b", t0 + Duration::from_secs(30)));
        assert!(!seen.first_time_at("a", t0 + Duration::from_secs(59)));
        assert!(seen.first_time_at("a", t0 + Duration::from_secs(60)), "expired");
        assert!(!seen.first_time_at("b", t0 + Duration::from_secs(60)));
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn a_full_store_drops_its_oldest_keys() {
        let seen = MemorySeen::new(3, Duration::from_secs(3600));
        let t0 = Instant::now();
        for key in ["a", "b", "c", "d"] {
            assert!(seen.first_time_at(key, t0));
        }
        assert_eq!(seen.len(), 3);
        assert!(!seen.first_time_at("d", t0));
        assert!(!seen.first_time_at("b", t0));
        assert!(seen.first_time_at("a", t0), "the oldest went first");
        // A key forgotten and recorded again is not dropped with its old entry.
        let seen = MemorySeen::new(3, Duration::from_secs(3600));
        for key in ["a", "b", "c"] {
            assert!(seen.first_time_at(key, t0));
        }
        block_on(seen.forget("b"));
        assert!(seen.first_time_at("b", t0), "forgotten");
        assert!(seen.first_time_at("d", t0));
        assert!(!seen.first_time_at("b", t0), "still remembered");
        assert!(!seen.first_time_at("c", t0));
        assert!(seen.first_time_at("a", t0), "the oldest went");
        assert!(seen.len() <= 3, "{}", seen.len());
    }
}
