//! Flow control per key (API 1g): a flow's fires over its rate or
//! parallelism, or while it is paused, wait in run-time order and leave
//! as soon as they are allowed.
//!
//! A fire of a limited flow joins its flow's queue on this node (ordered
//! by run time) and waits there, holding no callback slot. One driver task
//! per flow with fires waiting takes turns at the flow's shared state
//! ([`FlowTokens`]: Redis on a cluster, in process when embedded), which
//! hands out sends within the rate and parallelism to the oldest waiting
//! fire across the nodes; the driver lets that many fires go, oldest
//! first, each with the slot it holds while its callback is open. Fires
//! of flows without limits never meet any of this: one map lookup per
//! attempt.
//!
//! The limits are read from the database once a second by
//! [`FlowLimitsWatch`], on every node.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;
use xtimer_core::error::error_chain;
use xtimer_core::metrics::{FLOW_SENT_TOTAL, FLOW_WAITING};
use xtimer_core::SharedClock;
use xtimer_store::{FlowLimit, FlowRepo, FlowTokens, FlowTurn};

/// How often each node reads the flows' limits.
pub const LIMITS_EVERY: Duration = Duration::from_secs(1);

/// Most sends one turn asks for.
const MAX_TAKE: usize = 64;

/// How often a paused flow's driver reports its waiting fires (and looks
/// for a resume), and the longest it sleeps between turns.
const PAUSED_POLL: Duration = Duration::from_millis(250);

/// How often a flow at its parallelism asks again (a slot freed on this
/// node wakes it at once).
const FULL_POLL: Duration = Duration::from_millis(20);

/// Longest wait between two turns of a driver with fires waiting: it
/// renews the node's report well inside [`xtimer_store::flow_tokens::NODE_TTL_MS`].
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// Wait after the flows' state could not be reached.
const ERROR_BACKOFF: Duration = Duration::from_millis(500);

/// A waiting fire's turn.
#[derive(Debug)]
pub enum Turn {
    /// Go, holding this slot of the flow while the callback is open.
    Go(FlowSlot),
    /// It waited past its catch-up window: its timer's misfire policy
    /// says it is missed.
    Missed,
}

/// A send's place in its flow's parallelism, given back when dropped.
#[derive(Debug)]
pub struct FlowSlot {
    flows: Flows,
    flow: Arc<Flow>,
    id: Option<String>,
    /// The flow has no parallelism: its slot only counts it in
    /// `inFlight`, so it is given back with the flow's next turn, or
    /// within [`LAZY_GIVE_BACK`], rather than in a turn of its own.
    lazy: bool,
}

/// Longest a slot of a flow without parallelism waits to be given back.
const LAZY_GIVE_BACK: Duration = Duration::from_secs(1);

impl Drop for FlowSlot {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let mut state = self.flow.state.lock().expect("flow state");
        state.done.push(id);
        if state.driving {
            drop(state);
            self.flow.wake.notify_one();
        } else if !self.lazy {
            state.driving = true;
            drop(state);
            self.flows.drive(self.flow.clone());
        } else if !std::mem::replace(&mut state.flushing, true) {
            drop(state);
            let (flows, flow) = (self.flows.clone(), self.flow.clone());
            tokio::spawn(async move {
                tokio::time::sleep(LAZY_GIVE_BACK).await;
                let start = {
                    let mut state = flow.state.lock().expect("flow state");
                    state.flushing = false;
                    !state.done.is_empty() && !std::mem::replace(&mut state.driving, true)
                };
                if start {
                    flows.drive(flow);
                }
            });
        }
    }
}

/// The flows of this node: their limits and their waiting fires. Cheap to clone.
#[derive(Clone)]
pub struct Flows {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Flows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flows").field("node", &self.inner.node).finish_non_exhaustive()
    }
}

struct Inner {
    node: String,
    clock: SharedClock,
    tokens: Arc<dyn FlowTokens>,
    /// Limits by app, then key.
    limits: RwLock<Arc<HashMap<String, HashMap<String, FlowLimit>>>>,
    flows: Mutex<HashMap<(String, String), Arc<Flow>>>,
    /// How long a slot lasts if this node never gives it back.
    slot_ttl_ms: u64,
    seq: AtomicU64,
}

/// One limited flow's fires waiting on this node.
struct Flow {
    app: String,
    key: String,
    state: Mutex<FlowState>,
    wake: Notify,
    /// Its `xtimer_flow_waiting` and `xtimer_flow_sent_total`, looked up once.
    waiting_gauge: metrics::Gauge,
    sent: metrics::Counter,
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow").field("app", &self.app).field("key", &self.key).finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct FlowState {
    /// Waiting fires by (run time, task id, arrival).
    queue: BTreeMap<(i64, i64, u64), Waiter>,
    /// Slots of ended sends, to give back at the next turn.
    done: Vec<String>,
    /// Whether a driver runs for this flow.
    driving: bool,
    /// Whether a lazy give-back is on its way ([`FlowSlot::lazy`]).
    flushing: bool,
}

#[derive(Debug)]
struct Waiter {
    turn: oneshot::Sender<Turn>,
    /// When it is past its catch-up window, ms.
    missed_at: Option<i64>,
}

impl Flows {
    /// No limits yet (see [`FlowLimitsWatch`]); `slot_ttl_ms` bounds how
    /// long a send of this node counts against its flow's parallelism if
    /// the node dies before giving its slot back (the callback timeout
    /// and a margin).
    pub fn new(node: &str, clock: SharedClock, tokens: Arc<dyn FlowTokens>, slot_ttl_ms: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                node: node.to_owned(),
                clock,
                tokens,
                limits: RwLock::new(Arc::default()),
                flows: Mutex::new(HashMap::new()),
                slot_ttl_ms,
                seq: AtomicU64::new(0),
            }),
        }
    }

    /// Whether any flow of `app` has limits.
    pub fn any_limited(&self, app: &str) -> bool {
        self.inner.limits.read().expect("flow limits").contains_key(app)
    }

    /// Whether a flow has limits.
    pub fn limited(&self, app: &str, key: &str) -> bool {
        self.inner.limits.read().expect("flow limits").get(app).is_some_and(|flows| flows.contains_key(key))
    }

    /// The limits of a flow, if it has any.
    pub fn limit(&self, app: &str, key: &str) -> Option<FlowLimit> {
        self.inner.limits.read().expect("flow limits").get(app)?.get(key).cloned()
    }

    /// Replaces the limits known (every app's).
    pub fn set_limits(&self, limits: Vec<FlowLimit>) {
        let mut by_app: HashMap<String, HashMap<String, FlowLimit>> = HashMap::new();
        for limit in limits {
            by_app.entry(limit.app.clone()).or_default().insert(limit.key.clone(), limit);
        }
        {
            let mut limits = self.inner.limits.write().expect("flow limits");
            if **limits == by_app {
                return;
            }
            *limits = Arc::new(by_app);
        }
        // Waiting fires of a flow whose limits changed or went may go now.
        for flow in self.inner.flows.lock().expect("flows").values() {
            flow.wake.notify_one();
        }
    }

    /// Queues a fire (`run_ms`, `task_id`) of a limited flow; its turn
    /// comes on the receiver. Dropping the receiver leaves the queue.
    pub fn join(
        &self,
        app: &str,
        key: &str,
        run_ms: i64,
        task_id: i64,
        missed_at: Option<i64>,
    ) -> oneshot::Receiver<Turn> {
        let flow = {
            let mut flows = self.inner.flows.lock().expect("flows");
            flows
                .entry((app.to_owned(), key.to_owned()))
                .or_insert_with(|| {
                    let labels = [("app", app.to_owned()), ("key", key.to_owned())];
                    Arc::new(Flow {
                        app: app.to_owned(),
                        key: key.to_owned(),
                        state: Mutex::default(),
                        wake: Notify::new(),
                        waiting_gauge: metrics::gauge!(FLOW_WAITING, &labels),
                        sent: metrics::counter!(FLOW_SENT_TOTAL, &labels),
                    })
                })
                .clone()
        };
        let (tx, rx) = oneshot::channel();
        let seq = self.inner.seq.fetch_add(1, Ordering::Relaxed);
        let (start, head) = {
            let mut state = flow.state.lock().expect("flow state");
            let key = (run_ms, task_id, seq);
            state.queue.insert(key, Waiter { turn: tx, missed_at });
            let head = state.queue.first_key_value().is_some_and(|(first, _)| *first == key);
            (!std::mem::replace(&mut state.driving, true), head)
        };
        if start {
            self.drive(flow);
        } else if head {
            // A new oldest fire: the next turn reports it (the others wait
            // for the turn already due, not one each).
            flow.wake.notify_one();
        }
        rx
    }

    /// Fires of `app`'s flow `key` waiting on this node.
    pub fn waiting_here(&self, app: &str, key: &str) -> usize {
        let flows = self.inner.flows.lock().expect("flows");
        flows.get(&(app.to_owned(), key.to_owned())).map_or(0, |f| f.state.lock().expect("flow state").queue.len())
    }

    fn drive(&self, flow: Arc<Flow>) {
        let this = self.clone();
        tokio::spawn(async move { this.driver(flow).await });
    }

    /// Takes turns for `flow` while fires wait or slots are to be given
    /// back; lets fires go, oldest first, as the turns allow.
    async fn driver(self, flow: Arc<Flow>) {
        let inner = &self.inner;
        let mut warned = false;
        loop {
            let now = inner.clock.now_ms();
            let (head, waiting, done) = {
                let mut state = flow.state.lock().expect("flow state");
                state.queue.retain(|_, w| !w.turn.is_closed());
                let missed: Vec<_> = state
                    .queue
                    .iter()
                    .filter(|(_, w)| w.missed_at.is_some_and(|at| at <= now))
                    .map(|(k, _)| *k)
                    .collect();
                for key in missed {
                    if let Some(waiter) = state.queue.remove(&key) {
                        let _ = waiter.turn.send(Turn::Missed);
                    }
                }
                if state.queue.is_empty() && state.done.is_empty() {
                    state.driving = false;
                    flow.waiting_gauge.set(0.0);
                    return;
                }
                let head = state.queue.keys().next().map(|(run_ms, _, _)| *run_ms);
                (head, state.queue.len(), std::mem::take(&mut state.done))
            };
            flow.waiting_gauge.set(waiting as f64);
            let Some(limit) = self.limit(&flow.app, &flow.key) else {
                // No limits (any more): every waiting fire goes.
                let queue = std::mem::take(&mut flow.state.lock().expect("flow state").queue);
                for (_, waiter) in queue {
                    let slot = FlowSlot { flows: self.clone(), flow: flow.clone(), id: None, lazy: true };
                    let _ = waiter.turn.send(Turn::Go(slot));
                }
                continue;
            };
            let want = if limit.paused { 0 } else { waiting.min(MAX_TAKE) };
            let slots: Vec<String> =
                (0..want).map(|_| format!("{}:{}", inner.node, inner.seq.fetch_add(1, Ordering::Relaxed))).collect();
            let turn = FlowTurn {
                app: &flow.app,
                key: &flow.key,
                node: &inner.node,
                head_ms: head,
                waiting: waiting as u64,
                rate_per_sec: limit.rate_per_sec,
                burst: burst(limit.rate_per_sec),
                parallelism: limit.parallelism,
                paused: limit.paused,
                slots: &slots,
                done: &done,
                slot_ttl_ms: inner.slot_ttl_ms,
            };
            let grant = match inner.tokens.take(&turn).await {
                Ok(grant) => {
                    warned = false;
                    grant
                }
                Err(err) => {
                    if !std::mem::replace(&mut warned, true) {
                        tracing::warn!(app = %flow.app, key = %flow.key, "Taking a turn at a flow failed: {}; its fires wait.", error_chain(&err));
                    }
                    flow.state.lock().expect("flow state").done.extend(done);
                    tokio::time::sleep(ERROR_BACKOFF).await;
                    continue;
                }
            };
            let mut went = 0;
            {
                let mut state = flow.state.lock().expect("flow state");
                'grants: for id in slots.into_iter().take(grant.granted) {
                    let lazy = limit.parallelism.is_none();
                    let mut slot = FlowSlot { flows: self.clone(), flow: flow.clone(), id: Some(id), lazy };
                    loop {
                        let Some((_, waiter)) = state.queue.pop_first() else {
                            // All left meanwhile: the slot goes back at the
                            // next turn (taken out first: a slot dropped
                            // with its id would lock the state held here).
                            state.done.extend(slot.id.take());
                            continue 'grants;
                        };
                        match waiter.turn.send(Turn::Go(slot)) {
                            Ok(()) => {
                                went += 1;
                                continue 'grants;
                            }
                            // Its fire stopped waiting: the next one takes the slot.
                            Err(Turn::Go(back)) => slot = back,
                            Err(Turn::Missed) => continue 'grants,
                        }
                    }
                }
            }
            flow.sent.increment(went);
            if grant.granted == want && want > 0 {
                continue;
            }
            let sleep = match grant.retry_in_ms {
                _ if limit.paused => PAUSED_POLL,
                Some(ms) => Duration::from_millis(ms),
                None => FULL_POLL,
            };
            let next_missed = {
                let state = flow.state.lock().expect("flow state");
                state.queue.values().filter_map(|w| w.missed_at).min()
            };
            let sleep = match next_missed {
                Some(at) => sleep.min(Duration::from_millis((at - inner.clock.now_ms()).max(1) as u64)),
                None => sleep,
            };
            let _ = tokio::time::timeout(sleep.min(MAX_SLEEP), flow.wake.notified()).await;
        }
    }
}

/// Sends a flow lets go back to back: one at up to 50 a second, so any one
/// second holds at most `rate + 1`; above, a fiftieth of the rate (20 ms
/// of it), so that fast flows take a few sends per turn.
pub fn burst(rate_per_sec: Option<f64>) -> u32 {
    rate_per_sec.map_or(1, |rate| ((rate / 50.0).floor() as u32).max(1))
}

/// Reads every flow's limits into [`Flows`] once each [`LIMITS_EVERY`].
pub struct FlowLimitsWatch {
    flows: Flows,
    repo: Arc<dyn FlowRepo>,
}

impl FlowLimitsWatch {
    /// Watches `repo` for `flows`.
    pub fn new(flows: Flows, repo: Arc<dyn FlowRepo>) -> Self {
        Self { flows, repo }
    }

    /// Reads the limits now and then once a second until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut warned = false;
        loop {
            match self.repo.flow_limits(None).await {
                Ok(limits) => {
                    warned = false;
                    self.flows.set_limits(limits);
                }
                Err(err) if !std::mem::replace(&mut warned, true) => {
                    tracing::warn!("Reading the flows' limits failed: {}; the last ones read apply.", error_chain(&err))
                }
                Err(_) => {}
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(LIMITS_EVERY) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use xtimer_core::clock::SystemClock;
    use xtimer_core::Clock;
    use xtimer_store::MemoryFlowTokens;

    use super::*;

    fn limit(rate: Option<f64>, parallelism: Option<u32>, paused: bool) -> FlowLimit {
        FlowLimit { app: "a".into(), key: "k".into(), rate_per_sec: rate, parallelism, paused, modify_time: 0 }
    }

    fn flows() -> Flows {
        let clock: SharedClock = Arc::new(SystemClock);
        Flows::new("n1", clock.clone(), Arc::new(MemoryFlowTokens::new(clock)), 30_000)
    }

    #[test]
    fn bursts_keep_slow_flows_to_one() {
        assert_eq!(burst(None), 1);
        assert_eq!(burst(Some(20.0)), 1);
        assert_eq!(burst(Some(0.5)), 1);
        assert_eq!(burst(Some(100.0)), 2);
        assert_eq!(burst(Some(100_000.0)), 2_000);
    }

    #[tokio::test]
    async fn a_paused_flow_holds_its_fires_then_lets_them_go_oldest_first() {
        let flows = flows();
        flows.set_limits(vec![limit(None, Some(1), true)]);
        let mut turns: Vec<_> = [3, 1, 2].iter().map(|run| (*run, flows.join("a", "k", *run, *run, None))).collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        for (_, rx) in &mut turns {
            assert!(rx.try_recv().is_err(), "held while paused");
        }
        assert_eq!(flows.waiting_here("a", "k"), 3);
        flows.set_limits(vec![limit(None, Some(1), false)]);
        turns.sort_by_key(|(run, _)| *run);
        for (run, rx) in turns {
            let turn = tokio::time::timeout(Duration::from_secs(2), rx).await.expect("its turn comes").unwrap();
            let Turn::Go(slot) = turn else { panic!("fire {run} went") };
            assert_eq!(flows.waiting_here("a", "k") as i64, 3 - run, "oldest first, one at a time");
            drop(slot);
        }
    }

    #[tokio::test]
    async fn a_fire_past_its_window_is_missed_and_others_go_when_limits_go() {
        let flows = flows();
        flows.set_limits(vec![limit(None, None, true)]);
        let now = SystemClock.now_ms();
        let missed = flows.join("a", "k", 1, 1, Some(now + 50));
        let held = flows.join("a", "k", 2, 2, None);
        let turn = tokio::time::timeout(Duration::from_secs(2), missed).await.unwrap().unwrap();
        assert!(matches!(turn, Turn::Missed));
        flows.set_limits(Vec::new());
        let turn = tokio::time::timeout(Duration::from_secs(2), held).await.unwrap().unwrap();
        assert!(matches!(turn, Turn::Go(FlowSlot { id: None, .. })), "no limits: no slot");
    }
}
