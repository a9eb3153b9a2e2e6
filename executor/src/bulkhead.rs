//! Bulkheads: a receiver that hangs must not stall everyone else's timers.
//!
//! Callbacks in flight are capped per target host (`host:port`) and per
//! app, below the executor's whole concurrency, so a dead host holds at most
//! `per_host_concurrency` of it and the rest keeps firing on time. A fire
//! waits for its host's turn (holding nothing else) for at most its callback
//! timeout; then its attempt fails as busy and follows its retry policy.
//!
//! Each host also has a circuit breaker: after `breaker_failures` attempts
//! in a row that got no answer (timeouts, refused or reset connections) it
//! opens, and fires to that host fail at once instead of waiting on it.
//! After `breaker_open_ms` one probe goes through; success closes the
//! circuit, failure opens it again for twice as long (up to 16 times the
//! base). An HTTP answer of any status closes it: a host that answers,
//! even with errors, costs no one else anything.
//!
//! The tables hold one entry per host and per app with callbacks in flight
//! or a circuit not closed; idle entries are dropped once there are more
//! than [`IDLE_ENTRIES_KEPT`], so memory follows the hosts in use, not every
//! host ever called.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dashmap::DashMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use xtimer_core::config::ExecutorConfig;
use xtimer_core::SharedClock;

/// Idle host and app entries kept before idle ones are dropped.
pub const IDLE_ENTRIES_KEPT: usize = 1_024;

/// Longest an open circuit stays open, as a multiple of `breaker_open_ms`.
const MAX_OPEN_FACTOR: u64 = 16;

/// Why a callback may not go out now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The host's circuit is open after failures in a row.
    #[error("circuit open for {host}: {failures} callbacks in a row got no answer; next try after {retry_in_ms} ms")]
    CircuitOpen {
        /// The host, `host:port`.
        host: String,
        /// Failed attempts in a row.
        failures: u32,
        /// How long until a probe may go through, ms.
        retry_in_ms: i64,
    },
    /// The host (or the app) had no free slot within the wait.
    #[error("{what} has {limit} callbacks in flight (executor.{setting}); none finished within {waited_ms} ms")]
    Busy {
        /// `host h:p` or `app a`.
        what: String,
        /// The cap.
        limit: usize,
        /// The setting that sets the cap.
        setting: &'static str,
        /// How long the fire waited, ms.
        waited_ms: u64,
    },
}

/// Entries to the bulkheads between two looks for idle table entries.
const PRUNE_EVERY: usize = 256;

/// A permit of `semaphore`, waiting until `deadline` at most; at once when
/// one is free (no timer is set then).
async fn acquire_by(semaphore: &Arc<Semaphore>, deadline: tokio::time::Instant) -> Option<OwnedSemaphorePermit> {
    if let Ok(permit) = semaphore.clone().try_acquire_owned() {
        return Some(permit);
    }
    let permit = tokio::time::timeout_at(deadline, semaphore.clone().acquire_owned()).await.ok()?;
    Some(permit.expect("bulkhead semaphores are never closed"))
}

/// Per-host and per-app caps and circuit breakers of one executor.
pub struct Bulkheads {
    per_host: usize,
    per_app: usize,
    breaker_failures: u32,
    breaker_open_ms: i64,
    clock: SharedClock,
    hosts: DashMap<String, Arc<Host>>,
    apps: DashMap<String, Arc<Semaphore>>,
    /// Calls of `enter`, for pruning every [`PRUNE_EVERY`].
    entered: AtomicUsize,
}

struct Host {
    permits: Arc<Semaphore>,
    breaker: Mutex<Breaker>,
}

#[derive(Debug, Default)]
struct Breaker {
    /// Attempts in a row without an answer.
    failures: u32,
    /// Times the circuit opened since it was last closed.
    trips: u32,
    /// Open until this Unix ms (0: closed).
    open_until: i64,
    /// A probe is out while the circuit is half open.
    probing: bool,
}

/// The right to send one callback: holds its host's and app's slots until dropped.
pub struct Pass {
    host: Arc<Host>,
    probe: bool,
    _host_permit: OwnedSemaphorePermit,
    _app_permit: OwnedSemaphorePermit,
}

impl Bulkheads {
    /// Caps and breakers as `config` sets them, timed by `clock`.
    pub fn new(config: &ExecutorConfig, clock: SharedClock) -> Self {
        Self {
            per_host: config.per_host_concurrency,
            per_app: config.per_app_concurrency,
            breaker_failures: config.breaker_failures,
            breaker_open_ms: config.breaker_open_ms as i64,
            clock,
            hosts: DashMap::new(),
            apps: DashMap::new(),
            entered: AtomicUsize::new(0),
        }
    }

    /// Waits up to `wait` for a slot of `host` and then of `app`; refuses
    /// at once while the host's circuit is open.
    pub async fn enter(&self, app: &str, host: &str, wait: Duration) -> Result<Pass, Refusal> {
        if self.entered.fetch_add(1, Ordering::Relaxed).is_multiple_of(PRUNE_EVERY) {
            self.prune();
        }
        // Looked up by reference first: the key is copied only for a new host.
        let entry = match self.hosts.get(host) {
            Some(entry) => entry.clone(),
            None => self.hosts.entry(host.to_string()).or_insert_with(|| Arc::new(self.new_host())).clone(),
        };
        self.check_circuit(&entry, host, false)?;
        let busy =
            |what: String, limit, setting| Refusal::Busy { what, limit, setting, waited_ms: wait.as_millis() as u64 };
        let deadline = tokio::time::Instant::now() + wait;
        let host_permit = acquire_by(&entry.permits, deadline)
            .await
            .ok_or_else(|| busy(format!("host {host}"), self.per_host, "per_host_concurrency"))?;
        // The circuit may have opened while this fire waited its turn; only
        // now may it become the probe.
        let probe = self.check_circuit(&entry, host, true)?;
        let app_sem = match self.apps.get(app) {
            Some(sem) => sem.clone(),
            None => self.apps.entry(app.to_string()).or_insert_with(|| Arc::new(Semaphore::new(self.per_app))).clone(),
        };
        let app_permit = match acquire_by(&app_sem, deadline).await {
            Some(permit) => permit,
            None => {
                if probe {
                    entry.breaker.lock().expect("breaker lock").probing = false;
                }
                return Err(busy(format!("app {app}"), self.per_app, "per_app_concurrency"));
            }
        };
        Ok(Pass { host: entry, probe, _host_permit: host_permit, _app_permit: app_permit })
    }

    /// Whether `host`'s circuit is open now (for inspection and tests).
    pub fn is_open(&self, host: &str) -> bool {
        self.hosts.get(host).is_some_and(|h| h.breaker.lock().expect("breaker lock").open_until > self.clock.now_ms())
    }

    fn new_host(&self) -> Host {
        Host { permits: Arc::new(Semaphore::new(self.per_host)), breaker: Mutex::new(Breaker::default()) }
    }

    /// Refuses while the circuit is open; once its time is up, lets one
    /// probe through (when `claim_probe`) and refuses the others until the
    /// probe reports. Returns whether this caller is the probe.
    fn check_circuit(&self, host: &Host, name: &str, claim_probe: bool) -> Result<bool, Refusal> {
        let mut b = host.breaker.lock().expect("breaker lock");
        if b.open_until == 0 {
            return Ok(false);
        }
        let now = self.clock.now_ms();
        let refusal = |b: &Breaker| Refusal::CircuitOpen {
            host: name.to_string(),
            failures: b.failures,
            retry_in_ms: (b.open_until - now).max(0),
        };
        if now < b.open_until || b.probing {
            return Err(refusal(&b));
        }
        if claim_probe {
            b.probing = true;
            return Ok(true);
        }
        Ok(false)
    }

    fn open_ms(&self, trips: u32) -> i64 {
        let factor = 1u64 << trips.saturating_sub(1).min(4);
        self.breaker_open_ms * factor.min(MAX_OPEN_FACTOR) as i64
    }

    /// Drops idle entries once there are many: no callbacks in flight and
    /// the circuit closed.
    fn prune(&self) {
        if self.hosts.len() > IDLE_ENTRIES_KEPT {
            let per_host = self.per_host;
            self.hosts.retain(|_, h| {
                h.permits.available_permits() < per_host || h.breaker.lock().expect("breaker lock").open_until != 0
            });
        }
        if self.apps.len() > IDLE_ENTRIES_KEPT {
            let per_app = self.per_app;
            self.apps.retain(|_, s| s.available_permits() < per_app);
        }
    }
}

impl Pass {
    /// Reports how the callback went: `answered` is true when the host sent
    /// any HTTP answer, false on a timeout or a failed connection.
    pub fn report(mut self, bulkheads: &Bulkheads, answered: bool) {
        let probe = std::mem::take(&mut self.probe);
        let mut b = self.host.breaker.lock().expect("breaker lock");
        if probe {
            b.probing = false;
        }
        if answered {
            *b = Breaker::default();
            return;
        }
        b.failures = b.failures.saturating_add(1);
        let reopen = probe || (b.open_until == 0 && b.failures >= bulkheads.breaker_failures);
        if reopen {
            b.trips = b.trips.saturating_add(1);
            b.open_until = bulkheads.clock.now_ms() + bulkheads.open_ms(b.trips);
        }
    }
}

impl Drop for Pass {
    /// A probe dropped without a report (its node stopped) lets the next one through.
    fn drop(&mut self) {
        if self.probe {
            self.host.breaker.lock().expect("breaker lock").probing = false;
        }
    }
}

/// The bulkhead key of a callback URL: `host:port` (the scheme's port when
/// none is given); the URL itself if it does not parse.
pub fn host_of(url: &str) -> String {
    match url.parse::<hyper::Uri>() {
        Ok(u) if u.host().is_some() => crate::callback::host_key(&u),
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use xtimer_core::clock::ManualClock;

    use super::*;

    fn bulkheads(clock: Arc<ManualClock>) -> Bulkheads {
        let config = ExecutorConfig {
            per_host_concurrency: 2,
            per_app_concurrency: 3,
            breaker_failures: 3,
            breaker_open_ms: 1_000,
            ..ExecutorConfig::default()
        };
        Bulkheads::new(&config, clock)
    }

    const WAIT: Duration = Duration::from_millis(50);

    #[tokio::test(start_paused = true)]
    async fn a_full_host_refuses_after_the_wait_and_other_hosts_still_pass() {
        let b = bulkheads(Arc::new(ManualClock::new(0)));
        let _one = b.enter("a", "dead:80", WAIT).await.unwrap();
        let _two = b.enter("a", "dead:80", WAIT).await.unwrap();
        let err = b.enter("a", "dead:80", WAIT).await.err().unwrap();
        assert!(matches!(err, Refusal::Busy { limit: 2, setting: "per_host_concurrency", .. }), "{err}");
        assert!(b.enter("a", "alive:80", WAIT).await.is_ok(), "another host has its own slots");
    }

    #[tokio::test(start_paused = true)]
    async fn an_app_is_capped_across_hosts() {
        let b = bulkheads(Arc::new(ManualClock::new(0)));
        let _held: Vec<Pass> = futures_join(&b, &["h1:80", "h2:80", "h3:80"]).await;
        let err = b.enter("a", "h4:80", WAIT).await.err().unwrap();
        assert!(matches!(err, Refusal::Busy { limit: 3, setting: "per_app_concurrency", .. }), "{err}");
        assert!(b.enter("other", "h4:80", WAIT).await.is_ok(), "another app has its own slots");
    }

    async fn futures_join(b: &Bulkheads, hosts: &[&str]) -> Vec<Pass> {
        let mut out = Vec::new();
        for h in hosts {
            out.push(b.enter("a", h, WAIT).await.unwrap());
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn failures_in_a_row_open_the_circuit_and_a_probe_closes_it() {
        let clock = Arc::new(ManualClock::new(0));
        let b = bulkheads(clock.clone());
        for _ in 0..3 {
            b.enter("a", "dead:80", WAIT).await.unwrap().report(&b, false);
        }
        assert!(b.is_open("dead:80"));
        let err = b.enter("a", "dead:80", WAIT).await.err().unwrap();
        assert!(matches!(err, Refusal::CircuitOpen { failures: 3, retry_in_ms: 1_000, .. }), "{err}");
        // Half open: one probe, the others still refused while it is out.
        clock.advance(1_000);
        let probe = b.enter("a", "dead:80", WAIT).await.unwrap();
        assert!(matches!(b.enter("a", "dead:80", WAIT).await, Err(Refusal::CircuitOpen { .. })));
        // The probe fails: open again, for twice as long.
        probe.report(&b, false);
        clock.advance(1_999);
        assert!(b.enter("a", "dead:80", WAIT).await.is_err());
        clock.advance(1);
        b.enter("a", "dead:80", WAIT).await.unwrap().report(&b, true);
        assert!(!b.is_open("dead:80"));
        assert!(b.enter("a", "dead:80", WAIT).await.is_ok(), "closed again");
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_resets_the_count() {
        let b = bulkheads(Arc::new(ManualClock::new(0)));
        for answered in [false, false, true, false, false] {
            b.enter("a", "flaky:80", WAIT).await.unwrap().report(&b, answered);
        }
        assert!(!b.is_open("flaky:80"), "never three in a row");
    }

    #[test]
    fn hosts_are_keyed_with_their_port() {
        assert_eq!(host_of("http://example.com/x"), "example.com:80");
        assert_eq!(host_of("https://example.com/x"), "example.com:443");
        assert_eq!(host_of("http://127.0.0.1:9000/hook"), "127.0.0.1:9000");
        assert_eq!(host_of("http://Example.COM:8080"), "example.com:8080");
    }

    #[tokio::test]
    async fn idle_hosts_and_apps_are_dropped_past_the_kept_count() {
        let b = bulkheads(Arc::new(ManualClock::new(0)));
        let held = b.enter("busy", "busy:80", WAIT).await.unwrap();
        for i in 0..3 * IDLE_ENTRIES_KEPT {
            let pass = b.enter(&format!("app{i}"), &format!("h{i}:80"), WAIT).await.unwrap();
            pass.report(&b, true);
        }
        assert!(b.hosts.len() <= IDLE_ENTRIES_KEPT + PRUNE_EVERY, "hosts: {}", b.hosts.len());
        assert!(b.apps.len() <= IDLE_ENTRIES_KEPT + PRUNE_EVERY, "apps: {}", b.apps.len());
        assert!(b.hosts.contains_key("busy:80"), "a host with a callback in flight is kept");
        drop(held);
    }
}
