//! Flow turns (API 1g) on a paused tokio clock: what a node waiting for its
//! turn costs the flows' shared state, and how soon it goes once it may.
//! Two nodes share one in-process [`MemoryFlowTokens`] through a wrapper
//! that counts each node's calls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::oneshot;
use xtimer_core::clock::TokioClock;
use xtimer_core::SharedClock;
use xtimer_executor::flows::{Flows, Turn, BACKOFF_CAP};
use xtimer_store::{FlowFigures, FlowGrant, FlowLimit, FlowTokens, FlowTurn, MemoryFlowTokens};

/// A node's view of the shared state, counting its calls.
struct Counted {
    shared: Arc<MemoryFlowTokens>,
    calls: AtomicU64,
}

#[async_trait]
impl FlowTokens for Counted {
    async fn take(&self, turn: &FlowTurn<'_>) -> xtimer_store::Result<FlowGrant> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.shared.take(turn).await
    }

    async fn figures(&self, app: &str, key: &str) -> xtimer_store::Result<FlowFigures> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.shared.figures(app, key).await
    }

    async fn forget(&self, app: &str, key: &str) -> xtimer_store::Result<()> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.shared.forget(app, key).await
    }
}

impl Counted {
    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

/// Two nodes of one cluster: their flows and their counted calls.
struct Cluster {
    nodes: Vec<(Flows, Arc<Counted>)>,
}

impl Cluster {
    fn start(limit: FlowLimit) -> Self {
        let clock: SharedClock = Arc::new(TokioClock::new(1_000_000));
        let shared = Arc::new(MemoryFlowTokens::new(clock.clone()));
        let nodes = ["n1", "n2"]
            .into_iter()
            .map(|node| {
                let counted = Arc::new(Counted { shared: shared.clone(), calls: AtomicU64::new(0) });
                let flows = Flows::new(node, clock.clone(), counted.clone(), 60_000);
                flows.set_limits(vec![limit.clone()]);
                (flows, counted)
            })
            .collect();
        Self { nodes }
    }

    fn join(&self, node: usize, run_ms: i64) -> oneshot::Receiver<Turn> {
        self.nodes[node].0.join("a", "k", run_ms, run_ms, None)
    }

    fn calls(&self, node: usize) -> u64 {
        self.nodes[node].1.calls()
    }
}

fn parallelism(n: u32) -> FlowLimit {
    FlowLimit {
        app: "a".into(),
        key: "k".into(),
        rate_per_sec: None,
        parallelism: Some(n),
        paused: false,
        modify_time: 0,
    }
}

/// How soon a node sees a slot freed on another node: the back-off's cap,
/// and a turn's time.
fn soon() -> Duration {
    BACKOFF_CAP + Duration::from_millis(50)
}

/// Waits (on the paused clock) for a turn that must come within `within`.
async fn goes(turn: oneshot::Receiver<Turn>, within: Duration) -> Turn {
    tokio::time::timeout(within, turn).await.expect("its turn comes in time").expect("a turn")
}

/// The most calls a waiting node may make over `waited`: ten a second,
/// and a few more for the first steps of its back-off.
fn at_most(waited: Duration) -> u64 {
    waited.as_secs() * 10 + 5
}

/// A flow with parallelism 1 whose slot n1 holds for 10 s: n1's older fire
/// and n2's newer one wait meanwhile, each node making at most about ten
/// calls a second (before: n2, refused for n1's older fire, asked every
/// 2 ms; n1, at the flow's parallelism, every 20 ms). When the slot is
/// given back, n1's fire goes at once (freed on its own node) and n2's
/// within the back-off's cap once that one ends.
#[tokio::test(start_paused = true)]
async fn nodes_waiting_for_a_parallelism_slot_make_a_bounded_number_of_calls() {
    let cluster = Cluster::start(parallelism(1));
    let Turn::Go(held) = goes(cluster.join(0, 100), Duration::from_millis(10)).await else { panic!("goes") };
    let mut older = cluster.join(0, 200);
    let mut newer = cluster.join(1, 300);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = (cluster.calls(0), cluster.calls(1));
    let waited = Duration::from_secs(10);
    tokio::time::sleep(waited).await;
    assert!(older.try_recv().is_err() && newer.try_recv().is_err(), "both wait for the slot");
    let calls = (cluster.calls(0) - before.0, cluster.calls(1) - before.1);
    println!("calls over {waited:?} waiting: n1 {}, n2 {}", calls.0, calls.1);
    assert!(calls.0 <= at_most(waited), "n1, at the flow's parallelism, made {} calls in {waited:?}", calls.0);
    assert!(calls.1 <= at_most(waited), "n2, behind n1's older fire, made {} calls in {waited:?}", calls.1);

    drop(held);
    let Turn::Go(slot) = goes(older, Duration::from_millis(5)).await else { panic!("n1's older fire goes") };
    assert!(newer.try_recv().is_err(), "n2's newer fire waits for n1's");
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(slot);
    let Turn::Go(_slot) = goes(newer, soon()).await else { panic!("n2's fire goes") };
}

/// A node whose fire is the oldest but whose flow is at its parallelism
/// (the slot held on another node) waits at most about ten calls a second
/// and goes within the back-off's cap once the other node gives it back.
#[tokio::test(start_paused = true)]
async fn a_node_waiting_for_another_nodes_slot_backs_off_and_goes_when_it_is_freed() {
    let cluster = Cluster::start(parallelism(1));
    let Turn::Go(held) = goes(cluster.join(0, 100), Duration::from_millis(10)).await else { panic!("goes") };
    let mut waiting = cluster.join(1, 200);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = cluster.calls(1);
    let waited = Duration::from_secs(10);
    tokio::time::sleep(waited).await;
    assert!(waiting.try_recv().is_err(), "the slot is held");
    let calls = cluster.calls(1) - before;
    println!("calls over {waited:?} waiting for another node's slot: {calls}");
    assert!(calls <= at_most(waited), "n2 made {calls} calls in {waited:?}");
    drop(held);
    let Turn::Go(_slot) = goes(waiting, soon()).await else { panic!("n2's fire goes") };
}

/// A flow limited to 20 a second with 100 older fires waiting on n1 and a
/// newer one on n2: n1 sends at the rate (its turns are its sends), while
/// n2, behind n1's older fires, makes at most about ten calls a second
/// (before: one at each of the rate's tokens, 20 a second) and goes once
/// they have all gone.
#[tokio::test(start_paused = true)]
async fn a_node_behind_older_fires_of_a_rated_flow_asks_at_most_ten_times_a_second() {
    let rate = FlowLimit { rate_per_sec: Some(20.0), parallelism: None, ..parallelism(1) };
    let cluster = Cluster::start(rate);
    let (sent_tx, mut sent) = tokio::sync::mpsc::unbounded_channel();
    for run in 0..100 {
        let turn = cluster.join(0, 100 + run);
        let sent_tx = sent_tx.clone();
        tokio::spawn(async move {
            let Ok(Turn::Go(_slot)) = turn.await else { panic!("n1's fire {run} goes") };
            let _ = sent_tx.send(run);
        });
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut newer = cluster.join(1, 10_000);
    let before = cluster.calls(1);
    let waited = Duration::from_secs(4);
    tokio::time::sleep(waited).await;
    assert!(newer.try_recv().is_err(), "n1's older fires go first");
    let calls = cluster.calls(1) - before;
    println!("calls over {waited:?} behind a rated flow's older fires: {calls}");
    assert!(calls <= at_most(waited), "n2 made {calls} calls in {waited:?}");
    let Turn::Go(_slot) = goes(newer, Duration::from_secs(3)).await else { panic!("n2's fire goes") };
    drop(sent_tx);
    let mut order = Vec::new();
    while let Some(run) = sent.recv().await {
        order.push(run);
    }
    assert_eq!(order, (0..100).collect::<Vec<_>>(), "all of n1's went first, oldest first");
}
