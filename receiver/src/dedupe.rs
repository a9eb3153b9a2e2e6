//! Handling each fire once, and recording it only once it succeeded.
//!
//! xtimer sends a fire again after a timeout, a 5xx or a lost connection
//! (each retry with the same `Idempotency-Key`), and `replayFires` sends
//! old fires again on purpose; a node that dies mid-request leaves its fire
//! to another. xtimer counts a **409** as succeeded ("already done") and
//! sends that fire no more, so a receiver may answer 409 only to a key
//! whose work is done: recording the key before the work, and keeping it
//! when the work fails, would turn that failure into a success.
//!
//! Hence three steps, over a [`SeenKeys`] store:
//!
//! 1. [`begin`] reserves the key. A key already done is a
//!    [`Repeat::Done`] (409); a key reserved by a handler still in flight
//!    is a [`Repeat::InFlight`] (**503** with `Retry-After`: that handler
//!    may yet fail, so the repeat must neither do the work too nor count
//!    as done; xtimer retries it later).
//! 2. The handler does its work.
//! 3. [`Claim::commit`] when it succeeded (the key is done: later repeats
//!    get 409), [`Claim::abort`] when it failed (the reservation is
//!    dropped: the retry does the work).
//!
//! [`dedupe_with`] runs the three around a closure: commit on `Ok`, abort on
//! `Err`. A [`Claim`] dropped without either (a panic, or a request
//! cancelled when xtimer's timeout closed the connection) is abandoned: the
//! store frees it at once where it can ([`MemorySeen`] does), and every
//! reservation lapses at the end of its lease anyway, so a crashed handler
//! does not block its fire for good.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::Callback;

/// What [`SeenKeys::begin`] found for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// The key was free (new, aborted, or its reservation lapsed): it is
    /// now reserved for the caller, who commits or aborts it with `token`.
    Reserved {
        /// Names this reservation, so that a late commit or abort of a
        /// lapsed one does not touch its successor.
        token: u64,
    },
    /// The key was committed: its fire is done.
    Done,
    /// Another handler holds the key and has not finished.
    Busy {
        /// How long its reservation has left before it lapses.
        lease_left: Duration,
    },
}

/// Where a receiver keeps the keys it is handling and has handled: a
/// database table with a unique key, Redis (`SET key token NX PX lease` to
/// begin, a compare-and-set to commit or abort), or [`MemorySeen`] for one
/// process.
pub trait SeenKeys: Send + Sync {
    /// Reserves `key` when it is free; see [`Begin`]. Two concurrent calls
    /// with one key must not both reserve it. A reservation lapses after a
    /// lease the store chooses, longer than the work takes.
    fn begin(&self, key: &str) -> impl Future<Output = Begin> + Send;

    /// Marks `key` done (it was reserved under `token`): later
    /// [`begin`](Self::begin)s answer [`Begin::Done`] for as long as the
    /// store remembers it.
    fn commit(&self, key: &str, token: u64) -> impl Future<Output = ()> + Send;

    /// Drops the reservation `token` of `key`, if it is still the key's,
    /// so that the next delivery does the work.
    fn abort(&self, key: &str, token: u64) -> impl Future<Output = ()> + Send;

    /// A [`Claim`] was dropped without commit or abort: drop its
    /// reservation now if that needs no waiting. By default nothing: it
    /// lapses at the end of its lease.
    fn abandon(&self, key: &str, token: u64) {
        let _ = (key, token);
    }
}

impl<T: SeenKeys> SeenKeys for Arc<T> {
    fn begin(&self, key: &str) -> impl Future<Output = Begin> + Send {
        (**self).begin(key)
    }

    fn commit(&self, key: &str, token: u64) -> impl Future<Output = ()> + Send {
        (**self).commit(key, token)
    }

    fn abort(&self, key: &str, token: u64) -> impl Future<Output = ()> + Send {
        (**self).abort(key, token)
    }

    fn abandon(&self, key: &str, token: u64) {
        (**self).abandon(key, token)
    }
}

impl<T: SeenKeys> SeenKeys for &T {
    fn begin(&self, key: &str) -> impl Future<Output = Begin> + Send {
        (**self).begin(key)
    }

    fn commit(&self, key: &str, token: u64) -> impl Future<Output = ()> + Send {
        (**self).commit(key, token)
    }

    fn abort(&self, key: &str, token: u64) -> impl Future<Output = ()> + Send {
        (**self).abort(key, token)
    }

    fn abandon(&self, key: &str, token: u64) {
        (**self).abandon(key, token)
    }
}

/// The longest `Retry-After` a [`Repeat::InFlight`] asks for: the first
/// handler usually finishes (or fails) well before its lease ends.
pub const MAX_BUSY_RETRY_AFTER: Duration = Duration::from_secs(10);

/// A repeat of a fire that is done or in flight: [`begin`]'s refusal. As
/// an axum response (feature `axum`) a short text with a **409** (done:
/// xtimer records it as succeeded) or a **503** with `Retry-After` (in
/// flight: xtimer retries it, no sooner than asked).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Repeat {
    /// The key's work is done: 409.
    #[error("already done: {key}")]
    Done {
        /// The repeated `Idempotency-Key`.
        key: String,
    },
    /// Another handler is doing the key's work and may yet fail: 503.
    #[error("in progress: {key}; retry in {retry_after_secs} s")]
    InFlight {
        /// The repeated `Idempotency-Key`.
        key: String,
        /// The `Retry-After`, seconds: the reservation's lease left, at
        /// least 1 and at most [`MAX_BUSY_RETRY_AFTER`].
        retry_after_secs: u64,
    },
}

impl Repeat {
    /// The repeated `Idempotency-Key`.
    pub fn key(&self) -> &str {
        match self {
            Self::Done { key } | Self::InFlight { key, .. } => key,
        }
    }
}

/// A key reserved by [`begin`]: [`commit`](Self::commit) it when the work
/// succeeded, [`abort`](Self::abort) it when it failed. Dropped without
/// either, it is abandoned ([`SeenKeys::abandon`]).
#[must_use = "commit the claim when the work succeeded, abort it when it failed"]
pub struct Claim<'s, S: SeenKeys> {
    store: &'s S,
    key: String,
    token: u64,
    open: bool,
}

impl<S: SeenKeys> Claim<'_, S> {
    /// The reserved `Idempotency-Key`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The work succeeded: the key is done, and later repeats get 409.
    pub async fn commit(mut self) {
        self.store.commit(&self.key, self.token).await;
        self.open = false;
    }

    /// The work failed: the reservation is dropped, and the retry does
    /// the work.
    pub async fn abort(mut self) {
        self.store.abort(&self.key, self.token).await;
        self.open = false;
    }
}

impl<S: SeenKeys> Drop for Claim<'_, S> {
    fn drop(&mut self) {
        if self.open {
            self.store.abandon(&self.key, self.token);
        }
    }
}

impl<S: SeenKeys> std::fmt::Debug for Claim<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim").field("key", &self.key).field("token", &self.token).finish()
    }
}

/// Reserves the callback's `Idempotency-Key` in `store` for this handler:
/// a [`Claim`] to commit after the work succeeded or abort after it failed,
/// or a [`Repeat`] (409 done, 503 in flight). Takes a [`Callback`] or a
/// [`Signed`](crate::Signed).
pub async fn begin<'s, S: SeenKeys>(store: &'s S, callback: &impl AsRef<Callback>) -> Result<Claim<'s, S>, Repeat> {
    let key = &callback.as_ref().idempotency_key;
    match store.begin(key).await {
        Begin::Reserved { token } => Ok(Claim { store, key: key.clone(), token, open: true }),
        Begin::Done => Err(Repeat::Done { key: key.clone() }),
        Begin::Busy { lease_left } => {
            let lease_left = lease_left.min(MAX_BUSY_RETRY_AFTER);
            let retry_after_secs = (lease_left.as_secs() + u64::from(lease_left.subsec_nanos() > 0)).max(1);
            Err(Repeat::InFlight { key: key.clone(), retry_after_secs })
        }
    }
}

/// Runs `work` once per `Idempotency-Key`: [`begin`], then the work, then
/// commit on `Ok` or abort on `Err` (so the retry of a failed fire does the
/// work again). A repeat does not run `work` and is `Err(E::from(repeat))`:
/// with axum, `E` may be `Response` or any error of yours that takes a
/// [`Repeat`].
pub async fn dedupe_with<S, F, Fut, T, E>(store: &S, callback: &impl AsRef<Callback>, work: F) -> Result<T, E>
where
    S: SeenKeys,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: From<Repeat>,
{
    let claim = begin(store, callback).await?;
    match work().await {
        Ok(value) => {
            claim.commit().await;
            Ok(value)
        }
        Err(err) => {
            claim.abort().await;
            Err(err)
        }
    }
}

/// [`SeenKeys`] in this process's memory: at most `capacity` keys, each
/// done one remembered for `ttl`, each reservation held for at most its
/// lease (the oldest keys are dropped first when full). An abandoned
/// [`Claim`] is freed at once. Lost on a restart and not shared between
/// replicas; use a shared store when either matters.
pub struct MemorySeen {
    capacity: usize,
    ttl: Duration,
    lease: Duration,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Key to its entry.
    keys: HashMap<String, Entry>,
    /// Entries oldest first; one whose number no longer matches `keys`
    /// was aborted (or reserved again) and is skipped.
    order: VecDeque<(String, u64)>,
    next: u64,
}

struct Entry {
    /// The entry's number: its reservation's token.
    number: u64,
    done: bool,
    /// When it lapses (a reservation) or is forgotten (a done key).
    until: Instant,
}

impl Default for MemorySeen {
    /// 100,000 keys for 24 hours (longer than xtimer retries one fire),
    /// reservations for [`MemorySeen::DEFAULT_LEASE`].
    fn default() -> Self {
        Self::new(100_000, Duration::from_secs(24 * 3600))
    }
}

impl MemorySeen {
    /// How long a reservation holds by default: 60 s, longer than xtimer
    /// waits for an answer (`callbackTimeoutMs`, at most 30 s).
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);

    /// Remembers at most `capacity` keys (at least 1), each done one for
    /// `ttl`; reservations for [`DEFAULT_LEASE`](Self::DEFAULT_LEASE).
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Self { capacity: capacity.max(1), ttl, lease: Self::DEFAULT_LEASE, inner: Mutex::default() }
    }

    /// Holds each reservation for at most `lease`: longer than the work
    /// takes, or a repeat arriving after it lapsed does the work too.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How many keys it holds now, done or reserved (expired ones count
    /// until the next [`begin`](SeenKeys::begin) drops them).
    pub fn len(&self) -> usize {
        self.lock().keys.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The map is consistent after every statement: a panic elsewhere
        // while it was held leaves nothing half done.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn begin_at(&self, key: &str, now: Instant) -> Begin {
        let mut guard = self.lock();
        let inner = &mut *guard;
        // Drop the expired and the aborted from the front.
        while let Some((oldest, number)) = inner.order.front() {
            let live = match inner.keys.get(oldest) {
                Some(entry) if entry.number == *number => Some(entry.until),
                _ => None,
            };
            match live {
                Some(until) if now < until => break,
                Some(_) => {
                    let (oldest, _) = inner.order.pop_front().expect("a front entry");
                    inner.keys.remove(&oldest);
                }
                None => {
                    inner.order.pop_front();
                }
            }
        }
        match inner.keys.get(key) {
            Some(entry) if now < entry.until && entry.done => return Begin::Done,
            Some(entry) if now < entry.until => return Begin::Busy { lease_left: entry.until - now },
            _ => {}
        }
        let number = inner.next;
        inner.next += 1;
        inner.keys.insert(key.to_owned(), Entry { number, done: false, until: now + self.lease });
        inner.order.push_back((key.to_owned(), number));
        while inner.order.len() > self.capacity {
            let (oldest, n) = inner.order.pop_front().expect("over capacity");
            if inner.keys.get(&oldest).is_some_and(|entry| entry.number == n) {
                inner.keys.remove(&oldest);
            }
        }
        Begin::Reserved { token: number }
    }

    /// Commits `key`. The token is not checked: the work is done whatever
    /// became of the reservation.
    fn commit_at(&self, key: &str, _token: u64, now: Instant) {
        let mut inner = self.lock();
        let until = now + self.ttl;
        // Lapsed, taken by another or dropped when full, the key is done.
        match inner.keys.get_mut(key) {
            Some(entry) => {
                entry.done = true;
                entry.until = until;
            }
            None => {
                let number = inner.next;
                inner.next += 1;
                inner.keys.insert(key.to_owned(), Entry { number, done: true, until });
                inner.order.push_back((key.to_owned(), number));
                if inner.order.len() > self.capacity {
                    let (oldest, n) = inner.order.pop_front().expect("over capacity");
                    if inner.keys.get(&oldest).is_some_and(|entry| entry.number == n) {
                        inner.keys.remove(&oldest);
                    }
                }
            }
        }
    }

    fn release(&self, key: &str, token: u64) {
        let mut inner = self.lock();
        if inner.keys.get(key).is_some_and(|entry| entry.number == token && !entry.done) {
            inner.keys.remove(key);
        }
    }
}

impl SeenKeys for MemorySeen {
    fn begin(&self, key: &str) -> impl Future<Output = Begin> + Send {
        std::future::ready(self.begin_at(key, Instant::now()))
    }

    fn commit(&self, key: &str, token: u64) -> impl Future<Output = ()> + Send {
        self.commit_at(key, token, Instant::now());
        std::future::ready(())
    }

    fn abort(&self, key: &str, token: u64) -> impl Future<Output = ()> + Send {
        self.release(key, token);
        std::future::ready(())
    }

    fn abandon(&self, key: &str, token: u64) {
        self.release(key, token);
    }
}

impl std::fmt::Debug for MemorySeen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySeen")
            .field("capacity", &self.capacity)
            .field("ttl", &self.ttl)
            .field("lease", &self.lease)
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
            attempt: Some(1),
            signed_with: crate::Version::V2,
        }
    }

    fn block_on<F: Future>(future: F) -> F::Output {
        // The memory store's futures, and the work below, are ready at once.
        let mut future = std::pin::pin!(future);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match future.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(out) => out,
            std::task::Poll::Pending => panic!("the memory store never waits"),
        }
    }

    fn done(key: &str) -> Repeat {
        Repeat::Done { key: key.into() }
    }

    #[derive(Debug, PartialEq)]
    enum Failure {
        Repeat(Repeat),
        Work(&'static str),
    }

    impl From<Repeat> for Failure {
        fn from(repeat: Repeat) -> Self {
            Self::Repeat(repeat)
        }
    }

    #[test]
    fn a_key_is_done_only_once_committed() {
        let seen = MemorySeen::default();
        let claim = block_on(begin(&seen, &callback("7_1000"))).unwrap();
        assert_eq!(claim.key(), "7_1000");
        block_on(claim.commit());
        assert_eq!(block_on(begin(&seen, &callback("7_1000"))).unwrap_err(), done("7_1000"));
        let shared = Arc::new(seen);
        block_on(block_on(begin(&shared, &callback("7_2000"))).unwrap().commit());
        assert_eq!(block_on(begin(&shared, &callback("7_2000"))).unwrap_err(), done("7_2000"));
        assert_eq!(shared.len(), 2);
    }

    /// The old `dedupe` recorded the key before the work: a handler that
    /// failed after it left the retry a 409, and the work was never done.
    #[test]
    fn a_failed_handler_leaves_its_key_to_the_retry() {
        let seen = MemorySeen::default();
        let claim = block_on(begin(&seen, &callback("7_1000"))).unwrap();
        block_on(claim.abort());
        let retry = block_on(begin(&seen, &callback("7_1000")));
        assert!(retry.is_ok(), "the retry does the work, not a 409: {retry:?}");
        drop(retry);

        let mut runs = 0;
        let failed: Result<(), Failure> = block_on(dedupe_with(&seen, &callback("7_2000"), || {
            runs += 1;
            async { Err(Failure::Work("the database is down")) }
        }));
        assert_eq!(failed, Err(Failure::Work("the database is down")));
        let retried: Result<u32, Failure> = block_on(dedupe_with(&seen, &callback("7_2000"), || {
            runs += 1;
            async { Ok(7) }
        }));
        assert_eq!((retried, runs), (Ok(7), 2), "the retry ran the work");
        let repeated: Result<u32, Failure> = block_on(dedupe_with(&seen, &callback("7_2000"), || async {
            panic!("a done fire's repeat does not run the work")
        }));
        assert_eq!(repeated, Err(Failure::Repeat(done("7_2000"))));
    }

    #[test]
    fn a_repeat_while_the_first_is_in_flight_is_busy_not_done() {
        let seen = MemorySeen::default();
        let first = block_on(begin(&seen, &callback("7_1000"))).unwrap();
        let repeat = block_on(begin(&seen, &callback("7_1000"))).unwrap_err();
        assert!(matches!(&repeat, Repeat::InFlight { key, retry_after_secs: 10 } if key == "7_1000"), "{repeat:?}");
        assert_eq!(repeat.to_string(), "in progress: 7_1000; retry in 10 s");
        // The first fails: the next repeat does the work.
        block_on(first.abort());
        let second = block_on(begin(&seen, &callback("7_1000"))).unwrap();
        assert!(block_on(begin(&seen, &callback("7_1000"))).is_err_and(|r| matches!(r, Repeat::InFlight { .. })));
        block_on(second.commit());
        assert_eq!(block_on(begin(&seen, &callback("7_1000"))).unwrap_err(), done("7_1000"));
    }

    #[test]
    fn a_dropped_claim_is_freed() {
        let seen = MemorySeen::default();
        drop(block_on(begin(&seen, &callback("7_1000"))).unwrap());
        assert!(block_on(begin(&seen, &callback("7_1000"))).is_ok(), "a panicked or cancelled handler");
    }

    #[test]
    fn a_reservation_lapses_after_its_lease() {
        let seen = MemorySeen::new(10, Duration::from_secs(3600)).with_lease(Duration::from_secs(30));
        let t0 = Instant::now();
        let Begin::Reserved { token: first } = seen.begin_at("a", t0) else { panic!("a new key") };
        assert_eq!(
            seen.begin_at("a", t0 + Duration::from_millis(27_500)),
            Begin::Busy { lease_left: Duration::from_millis(2_500) }
        );
        let Begin::Reserved { token: second } = seen.begin_at("a", t0 + Duration::from_secs(30)) else {
            panic!("lapsed: a hung handler does not hold the key for good")
        };
        // The first handler's late abort does not free its successor's reservation...
        seen.release("a", first);
        assert!(matches!(seen.begin_at("a", t0 + Duration::from_secs(31)), Begin::Busy { .. }));
        // ...and its late success still counts.
        seen.commit_at("a", first, t0 + Duration::from_secs(32));
        assert_eq!(seen.begin_at("a", t0 + Duration::from_secs(33)), Begin::Done);
        seen.release("a", second);
        assert_eq!(seen.begin_at("a", t0 + Duration::from_secs(34)), Begin::Done, "a done key is not aborted");
        // A busy repeat's Retry-After is the lease left, rounded up, at least 1 s.
        let lease_left = |left: Duration| {
            let seen = MemorySeen::default().with_lease(left);
            let _first = block_on(begin(&seen, &callback("k"))).unwrap();
            block_on(begin(&seen, &callback("k"))).unwrap_err()
        };
        assert!(matches!(lease_left(Duration::from_millis(2_500)), Repeat::InFlight { retry_after_secs: 3, .. }));
        assert!(matches!(lease_left(Duration::from_secs(3600)), Repeat::InFlight { retry_after_secs: 10, .. }));
    }

    #[test]
    fn done_keys_expire_after_the_ttl() {
        let seen = MemorySeen::new(10, Duration::from_secs(60));
        let t0 = Instant::now();
        for (key, at) in [("a", t0), ("b", t0 + Duration::from_secs(30))] {
            let Begin::Reserved { token } = seen.begin_at(key, at) else { panic!("new") };
            seen.commit_at(key, token, at);
        }
        assert_eq!(seen.begin_at("a", t0 + Duration::from_secs(59)), Begin::Done);
        assert!(matches!(seen.begin_at("a", t0 + Duration::from_secs(60)), Begin::Reserved { .. }), "expired");
        assert_eq!(seen.begin_at("b", t0 + Duration::from_secs(60)), Begin::Done);
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn a_full_store_drops_its_oldest_keys() {
        let seen = MemorySeen::new(3, Duration::from_secs(3600)).with_lease(Duration::from_secs(3600));
        let t0 = Instant::now();
        let reserve = |key: &str| match seen.begin_at(key, t0) {
            Begin::Reserved { token } => token,
            other => panic!("{key}: {other:?}"),
        };
        for key in ["a", "b", "c", "d"] {
            reserve(key);
        }
        assert_eq!(seen.len(), 3);
        assert!(matches!(seen.begin_at("d", t0), Begin::Busy { .. }));
        assert!(matches!(seen.begin_at("b", t0), Begin::Busy { .. }));
        reserve("a"); // the oldest went first
                      // A key aborted and reserved again is not dropped with its old entry.
        let seen = MemorySeen::new(3, Duration::from_secs(3600));
        let reserve = |key: &str| match seen.begin_at(key, t0) {
            Begin::Reserved { token } => token,
            other => panic!("{key}: {other:?}"),
        };
        let tokens: Vec<u64> = ["a", "b", "c"].into_iter().map(reserve).collect();
        seen.release("b", tokens[1]);
        reserve("b");
        reserve("d");
        assert!(matches!(seen.begin_at("b", t0), Begin::Busy { .. }), "still held");
        assert!(matches!(seen.begin_at("c", t0), Begin::Busy { .. }));
        reserve("a"); // the oldest went
        assert!(seen.len() <= 3, "{}", seen.len());
    }
}
