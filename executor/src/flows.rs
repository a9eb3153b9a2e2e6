//! Flow control per key (API 1g): a flow's fires over its rate or
//! parallelism, or while it is paused, wait in run-time order and leave
//! as soon as they are allowed.
//!
//! A fire of a limited flow joins its flow's queue on this node (ordered
//! by run time) and waits there, holding no callback slot. One driver task
//! per flow with fires waiting (or slots open) takes turns at the flow's
//! shared state ([`FlowTokens`]: Redis on a cluster, in process when
//! embedded), which hands out sends within the rate and parallelism to the
//! oldest waiting fire across the nodes; the driver lets that many fires
//! go, oldest first, each with the slot it holds while its callback is
//! open. Fires of flows without limits never meet any of this: one map
//! lookup per attempt.
//!
//! # No busy waiting
//!
//! A refused turn costs a bounded number of store calls a second. A node
//! waits for what it was told (the rate's next token), else for a local
//! event (a slot of the flow given back on this node, a new oldest fire, a
//! change of limits) or a back-off from [`BACKOFF_FROM`] doubling up to
//! [`BACKOFF_CAP`] (a slot freed on another node, or another node's older
//! fires leaving): fewer than ten turns in its first second of waiting,
//! four or five a second once the back-off is at its cap. A paused flow,
//! or a node that only holds slots, takes a turn each [`MAX_SLEEP`] to
//! renew its report.
//!
//! # Leaving in order
//!
//! Fires granted together leave one after another, oldest first: each
//! goes when the one before it ended its callback, or [`HANDOFF`] after it
//! left, whichever comes first, so that a flow's fires reach the receiver
//! in run-time order when a paused flow resumes or a flow at its
//! parallelism gets several slots (a rate's sends are spaced by the rate
//! already). When a flow's limits are removed, its waiting fires drain the
//! same way, and while any node still has fires of it waiting, this node's
//! new fires of it queue behind them rather than overtake ([`Flows::limited`]).
//!
//! The limits are read from the database once a second by
//! [`FlowLimitsWatch`], on every node.

use std::collections::{BTreeMap, HashMap, HashSet};
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

/// First wait of a node refused with no time to wait for (the flow at its
/// parallelism, or an older fire on another node and no rate); each
/// refusal in a row doubles it, up to [`BACKOFF_CAP`]. A slot given back
/// on this node wakes the driver at once.
pub const BACKOFF_FROM: Duration = Duration::from_millis(20);

/// Longest wait of a refused node: how late, at most, it sees a slot freed
/// on another node.
pub const BACKOFF_CAP: Duration = Duration::from_millis(250);

/// Longest wait between two turns of a driver: it renews the node's report
/// (its waiting fires, its slots open) well inside
/// [`xtimer_store::flow_tokens::NODE_TTL_MS`]; a paused flow's driver only
/// reports (a resume wakes it).
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// Longest a fire let go waits for the one before it to end its callback
/// before it goes too.
pub const HANDOFF: Duration = Duration::from_millis(10);

/// Wait after the flows' state could not be reached.
const ERROR_BACKOFF: Duration = Duration::from_millis(500);

/// What a flow whose limits were removed drains under: its order only.
const NO_LIMITS: FlowLimit = FlowLimit {
    app: String::new(),
    key: String::new(),
    rate_per_sec: None,
    parallelism: None,
    paused: false,
    modify_time: 0,
};

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
    flow: Arc<Flow>,
    id: Option<String>,
    /// The flow has no parallelism: its slot only counts it in
    /// `inFlight`, so it is given back with the flow's next turn (within
    /// [`MAX_SLEEP`]) rather than in a turn of its own.
    lazy: bool,
    /// Tells the driver this send ended: the next fire may go.
    ended: Option<oneshot::Sender<()>>,
}

impl Drop for FlowSlot {
    fn drop(&mut self) {
        if let Some(ended) = self.ended.take() {
            let _ = ended.send(());
        }
        let Some(id) = self.id.take() else { return };
        {
            let mut state = self.flow.state.lock().expect("flow state");
            state.open -= 1;
            state.done.push(id);
        }
        // The driver runs while the flow has slots open: it gives this one
        // back at its next turn, at once if another fire may take it.
        if !self.lazy {
            self.flow.wake.notify_one();
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
    known: RwLock<Known>,
    flows: Mutex<HashMap<(String, String), Arc<Flow>>>,
    /// How long a slot lasts if this node never gives it back.
    slot_ttl_ms: u64,
    seq: AtomicU64,
}

/// The flows this node knows, by app, then key.
#[derive(Debug, Default)]
struct Known {
    /// The limits read.
    limits: HashMap<String, HashMap<String, FlowLimit>>,
    /// Flows whose limits were removed while fires of them may still wait
    /// somewhere: their fires still queue, to leave after those.
    freed: HashMap<String, HashSet<String>>,
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
    /// Slots this node holds open (let go, not yet ended).
    open: usize,
    /// Whether a driver runs for this flow (it does while fires wait, or
    /// slots are open or to give back).
    driving: bool,
}

#[derive(Debug)]
struct Waiter {
    turn: oneshot::Sender<Turn>,
    /// When it is past its catch-up window, ms.
    missed_at: Option<i64>,
}

/// The wait after a refusal with no time to wait for: from
/// [`BACKOFF_FROM`], doubling up to [`BACKOFF_CAP`].
#[derive(Debug)]
struct Backoff(Duration);

impl Backoff {
    fn new() -> Self {
        Self(BACKOFF_FROM)
    }

    /// The next wait, less up to a fifth at random (nodes refused together
    /// do not ask again together).
    fn next(&mut self) -> Duration {
        let wait = self.0;
        self.0 = (wait * 2).min(BACKOFF_CAP);
        wait.mul_f64(1.0 - rand::random::<f64>() / 5.0)
    }

    fn reset(&mut self) {
        self.0 = BACKOFF_FROM;
    }
}

impl Flows {
    /// No limits yet (see [`FlowLimitsWatch`]); `slot_ttl_ms` bounds how
    /// long a send of this node counts against its flow's parallelism if
    /// the node dies before giving its slot back and its report in the
    /// flow's state never lapses (the callback timeout and a margin).
    pub fn new(node: &str, clock: SharedClock, tokens: Arc<dyn FlowTokens>, slot_ttl_ms: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                node: node.to_owned(),
                clock,
                tokens,
                known: RwLock::default(),
                flows: Mutex::new(HashMap::new()),
                slot_ttl_ms,
                seq: AtomicU64::new(0),
            }),
        }
    }

    /// Whether any flow of `app` has limits (or drains after they were removed).
    pub fn any_limited(&self, app: &str) -> bool {
        let known = self.inner.known.read().expect("flow limits");
        known.limits.contains_key(app) || known.freed.contains_key(app)
    }

    /// Whether a fire of a flow waits for its turn: the flow has limits,
    /// or had until lately and fires of it may still wait on some node
    /// (they leave first).
    pub fn limited(&self, app: &str, key: &str) -> bool {
        let known = self.inner.known.read().expect("flow limits");
        known.limits.get(app).is_some_and(|flows| flows.contains_key(key))
            || known.freed.get(app).is_some_and(|flows| flows.contains(key))
    }

    /// The limits of a flow, if it has any.
    pub fn limit(&self, app: &str, key: &str) -> Option<FlowLimit> {
        self.inner.known.read().expect("flow limits").limits.get(app)?.get(key).cloned()
    }

    /// Replaces the limits known (every app's). A flow whose limits are
    /// gone keeps its fires in line (they drain in order) until
    /// [`Self::settle_freed`] finds none of them waiting on any node.
    pub fn set_limits(&self, limits: Vec<FlowLimit>) {
        let mut by_app: HashMap<String, HashMap<String, FlowLimit>> = HashMap::new();
        for limit in limits {
            by_app.entry(limit.app.clone()).or_default().insert(limit.key.clone(), limit);
        }
        {
            let mut known = self.inner.known.write().expect("flow limits");
            if known.limits == by_app {
                return;
            }
            let known = &mut *known;
            for (app, flows) in &known.limits {
                for key in flows.keys().filter(|key| !by_app.get(app).is_some_and(|now| now.contains_key(*key))) {
                    known.freed.entry(app.clone()).or_default().insert(key.clone());
                }
            }
            for (app, flows) in &by_app {
                if let Some(keys) = known.freed.get_mut(app) {
                    keys.retain(|key| !flows.contains_key(key));
                }
            }
            known.freed.retain(|_, keys| !keys.is_empty());
            known.limits = by_app;
        }
        // Waiting fires of a flow whose limits changed or went may go now.
        for flow in self.inner.flows.lock().expect("flows").values() {
            flow.wake.notify_one();
        }
    }

    /// Forgets the flows whose limits were removed and whose fires wait
    /// neither here nor (as the flows' state counts them) on any other
    /// node: their fires go straight out again.
    pub async fn settle_freed(&self) {
        let freed: Vec<(String, String)> = {
            let known = self.inner.known.read().expect("flow limits");
            known.freed.iter().flat_map(|(app, keys)| keys.iter().map(move |key| (app.clone(), key.clone()))).collect()
        };
        for (app, key) in freed {
            if self.waiting_here(&app, &key) > 0 {
                continue;
            }
            match self.inner.tokens.figures(&app, &key).await {
                Ok(figures) if figures.waiting == 0 => {}
                // Still waiting elsewhere, or not known: kept in line.
                _ => continue,
            }
            let mut known = self.inner.known.write().expect("flow limits");
            if let Some(keys) = known.freed.get_mut(&app) {
                keys.remove(&key);
                if keys.is_empty() {
                    known.freed.remove(&app);
                }
            }
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

    /// Takes turns for `flow` while fires wait, or slots are open or to be
    /// given back; lets fires go, oldest first, as the turns allow.
    async fn driver(self, flow: Arc<Flow>) {
        let inner = &self.inner;
        let mut warned = false;
        let mut backoff = Backoff::new();
        loop {
            let now = inner.clock.now_ms();
            let (head, waiting, done, holding) = {
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
                if state.queue.is_empty() && state.done.is_empty() && state.open == 0 {
                    state.driving = false;
                    flow.waiting_gauge.set(0.0);
                    return;
                }
                let head = state.queue.keys().next().map(|(run_ms, _, _)| *run_ms);
                (head, state.queue.len(), std::mem::take(&mut state.done), state.open)
            };
            flow.waiting_gauge.set(waiting as f64);
            // No limits (any more): its waiting fires drain in order.
            let limit = self.limit(&flow.app, &flow.key).unwrap_or(NO_LIMITS);
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
                holding: holding as u64,
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
            let granted: Vec<String> = slots.into_iter().take(grant.granted).collect();
            let lazy = limit.parallelism.is_none();
            // A rate spaces its sends already; the others leave one by one.
            let one_by_one = limit.rate_per_sec.is_none();
            let went = self.let_go(&flow, granted, lazy, one_by_one).await;
            flow.sent.increment(went);
            if grant.granted > 0 {
                backoff.reset();
            }
            if grant.granted == want && want > 0 {
                continue;
            }
            let own_all =
                limit.parallelism.is_some_and(|cap| flow.state.lock().expect("flow state").open >= cap as usize);
            let wait = if want == 0 || (own_all && !grant.behind) {
                // Paused, or only slots open, or every slot of the flow is
                // open here (one given back wakes the driver): a report
                // now and then.
                MAX_SLEEP
            } else {
                match grant.retry_in_ms.map(Duration::from_millis) {
                    // Behind another node's older fires: their turn first.
                    Some(next_token) if grant.behind => next_token.max(backoff.next()),
                    Some(next_token) => next_token,
                    None => backoff.next(),
                }
            };
            let next_missed = {
                let state = flow.state.lock().expect("flow state");
                state.queue.values().filter_map(|w| w.missed_at).min()
            };
            let wait = match next_missed {
                Some(at) => wait.min(Duration::from_millis((at - inner.clock.now_ms()).max(1) as u64)),
                None => wait,
            };
            let _ = tokio::time::timeout(wait.min(MAX_SLEEP), flow.wake.notified()).await;
        }
    }

    /// Lets the oldest waiting fires go with the slots `granted`; with
    /// `one_by_one`, each after the one before it ended its callback or
    /// [`HANDOFF`] after that one left. Returns how many went.
    async fn let_go(&self, flow: &Arc<Flow>, granted: Vec<String>, lazy: bool, one_by_one: bool) -> u64 {
        let mut went = 0;
        let mut ended: Option<oneshot::Receiver<()>> = None;
        let mut granted = granted.into_iter();
        while let Some(id) = granted.next() {
            if let Some(ended) = ended.take() {
                let _ = tokio::time::timeout(HANDOFF, ended).await;
            }
            let (ended_tx, ended_rx) = if one_by_one {
                let (tx, rx) = oneshot::channel();
                (Some(tx), Some(rx))
            } else {
                (None, None)
            };
            let mut state = flow.state.lock().expect("flow state");
            state.open += 1;
            let mut slot = FlowSlot { flow: flow.clone(), id: Some(id), lazy, ended: ended_tx };
            loop {
                let Some((_, waiter)) = state.queue.pop_first() else {
                    // All left meanwhile: the slots go back at the next turn
                    // (taken out first: a slot dropped with its id would
                    // lock the state held here).
                    state.open -= 1;
                    state.done.extend(slot.id.take());
                    state.done.extend(granted);
                    return went;
                };
                match waiter.turn.send(Turn::Go(slot)) {
                    Ok(()) => {
                        went += 1;
                        break;
                    }
                    // Its fire stopped waiting: the next one takes the slot.
                    Err(Turn::Go(back)) => slot = back,
                    Err(Turn::Missed) => unreachable!("a turn sent back is the one sent"),
                }
            }
            drop(state);
            ended = ended_rx;
        }
        went
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
                    self.flows.settle_freed().await;
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
        assert!(matches!(turn, Turn::Go(FlowSlot { lazy: true, .. })), "no limits: no place held");
    }

    /// Paused with no parallelism, five fires wait; when the limits go,
    /// they leave oldest first, each when the one before it ended, or
    /// [`HANDOFF`] after it left when that one's callback is still open.
    /// A fire joining meanwhile waits behind them; once none wait, the
    /// flow's fires go straight out again.
    #[tokio::test]
    async fn fires_drain_in_order_when_the_limits_go_and_new_ones_wait_behind() {
        let flows = flows();
        flows.set_limits(vec![limit(None, None, true)]);
        let turns: Vec<_> = [5, 3, 1, 4, 2].iter().map(|run| (*run, flows.join("a", "k", *run, *run, None))).collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(flows.waiting_here("a", "k"), 5);
        let (tx, mut went) = tokio::sync::mpsc::unbounded_channel();
        for (run, rx) in turns {
            let tx = tx.clone();
            tokio::spawn(async move {
                let Ok(Turn::Go(slot)) = rx.await else { panic!("fire {run} goes") };
                let _ = tx.send((run, std::time::Instant::now(), slot));
            });
        }
        flows.set_limits(Vec::new());
        assert!(flows.limited("a", "k"), "its fires still wait: new ones line up behind");
        let later = flows.join("a", "k", 6, 6, None);
        // 1 and 2 end at once; 3, 4 and 5 keep their callbacks open.
        let mut order = Vec::new();
        let mut open = Vec::new();
        for _ in 0..5 {
            let (run, at, slot) = tokio::time::timeout(Duration::from_secs(2), went.recv()).await.unwrap().unwrap();
            order.push((run, at));
            if run > 2 {
                open.push(slot);
            }
        }
        assert_eq!(order.iter().map(|(run, _)| *run).collect::<Vec<_>>(), [1, 2, 3, 4, 5], "oldest first");
        for pair in order[2..].windows(2) {
            // (Less a margin: each is seen a little after it went.)
            assert!(
                pair[1].1 - pair[0].1 >= HANDOFF / 2,
                "{} went {:?} after {}",
                pair[1].0,
                pair[1].1 - pair[0].1,
                pair[0].0
            );
        }
        let Ok(Turn::Go(_slot)) = tokio::time::timeout(Duration::from_secs(2), later).await.unwrap() else {
            panic!("the later fire goes after them")
        };
        drop(open);
        flows.settle_freed().await;
        assert!(!flows.limited("a", "k"), "none waits any more");
        assert!(!flows.any_limited("a"));
    }

    /// A flow whose limits are removed and set again keeps no drain.
    #[tokio::test]
    async fn limits_set_again_end_a_drain() {
        let flows = flows();
        flows.set_limits(vec![limit(Some(5.0), None, false)]);
        flows.set_limits(Vec::new());
        assert!(flows.limited("a", "k"));
        assert!(flows.limit("a", "k").is_none());
        flows.set_limits(vec![limit(None, Some(2), false)]);
        assert_eq!(flows.inner.known.read().unwrap().freed.len(), 0);
        flows.set_limits(Vec::new());
        flows.settle_freed().await;
        assert!(!flows.limited("a", "k"), "none waits: settled at once");
    }
}
