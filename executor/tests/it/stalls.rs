//! A node that stood still: a claim it held across the stall is checked
//! again before it is sent (another node may have taken it over), and a
//! callback cut short by the stall is not the receiver's fault.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio_util::sync::CancellationToken;
use xtimer_core::fire::FireStatus;
use xtimer_core::node::{Liveness, NodeInfo};
use xtimer_core::pause::PauseDetector;
use xtimer_core::timer::{MisfirePolicy, RetryPolicy, TimerStatus};
use xtimer_executor::Callbacks;
use xtimer_store::{FireRepo, NodeRepo};

use crate::helpers::{eventually, reconciler_config, Db, Harness, LEASE_MS, T0};

/// Node `id`'s heartbeat row, last written at `at_ms`.
fn node(id: &str, at_ms: i64) -> NodeInfo {
    NodeInfo {
        id: id.into(),
        host: "h".into(),
        listen: "127.0.0.1:1".into(),
        started_at: at_ms,
        heartbeat_at: at_ms,
        shards: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_held_across_a_heartbeat_gap_is_sent_only_if_no_other_node_took_it() {
    // No heartbeat has reached the database: every claim this node holds
    // was held across a gap, and is checked before it is sent.
    let liveness = Arc::new(Liveness::new(1_500));
    let h = Harness::start_node(reconciler_config(), Callbacks::default(), liveness).await;
    let t = h.timer("fenced", TimerStatus::Enabled, MisfirePolicy::FireAll).await;
    let keys = h.fires(&t, &[-2_000, -1_000]).await;
    let held = h.executor.held_now();
    let claimed = h.repo.claim(&keys, "node-a:100", LEASE_MS as i64, T0).await.unwrap().claimed;
    assert_eq!(claimed.len(), 2);

    // Meanwhile node-a looked dead to node-b (no heartbeat for 10 s),
    // which took the first fire over.
    h.repo.heartbeat(&node("node-a", T0 - 10_000)).await.unwrap();
    let taken = h.repo.reclaim(&[claimed[0].task_id], "node-b:1", LEASE_MS as i64, T0, T0 - 3_000).await.unwrap();
    assert_eq!(taken.claimed.len(), 1, "node-b took the first fire over");

    h.executor.dispatch(claimed, held).await.unwrap();
    h.receiver.wait_for(&keys[1..]).await;
    h.wait_for_status(&keys[1..], FireStatus::Succeeded).await;
    h.wait_idle().await;
    assert_eq!(h.receiver.hits(keys[0]), 0, "the fire node-b took over is not sent by node-a");
    assert_eq!(h.receiver.hits(keys[1]), 1);
    let first = h.fire(keys[0]).await;
    assert_eq!(first.status, FireStatus::Running, "node-b's claim stands: {first:?}");
    // The check wrote node-a's heartbeat, so node-b cannot take the second
    // fire while node-a sends it.
    let nodes = h.repo.list_nodes(T0 - 1).await.unwrap();
    assert_eq!(nodes.iter().find(|n| n.id == "node-a").map(|n| n.heartbeat_at), Some(T0));
}

/// A receiver that answers every request 200 but keeps the first one
/// waiting a minute; counts requests.
async fn slow_first_receiver() -> (std::net::SocketAddr, Arc<AtomicU32>) {
    let seen = Arc::new(AtomicU32::new(0));
    let app = Router::new().fallback({
        let seen = seen.clone();
        move || {
            let seen = seen.clone();
            async move {
                if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                "ok"
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

// One thread: blocking it stops the whole node, as SIGSTOP would.
#[tokio::test(flavor = "current_thread")]
async fn a_callback_cut_short_by_a_stall_of_the_node_is_sent_again_not_failed() {
    let h = Harness::start(reconciler_config()).await;
    let stop = CancellationToken::new();
    tokio::spawn(PauseDetector { watch: h.pause.clone() }.run(stop.clone()));
    let (addr, seen) = slow_first_receiver().await;
    let url = format!("http://{addr}/hook");
    let one_attempt = RetryPolicy { max_attempts: 1, backoff_ms: 0, no_retry_statuses: None };
    let t = h.timer_to("stalled", TimerStatus::Enabled, MisfirePolicy::FireAll, &url, one_attempt).await;
    let keys = h.fires(&t, &[-1_000]).await;
    let held = h.executor.held_now();
    let claimed = h.repo.claim(&keys, "node-a:7", LEASE_MS as i64, T0).await.unwrap().claimed;
    h.executor.dispatch(claimed, held).await.unwrap();
    assert!(eventually(|| async { seen.load(Ordering::SeqCst) == 1 }).await, "the first request is out");

    // The node stands still for longer than the callback's timeout (5 s here).
    std::thread::sleep(Duration::from_secs(6));

    h.wait_for_status(&keys, FireStatus::Succeeded).await;
    let fire = h.fire(keys[0]).await;
    assert_eq!((fire.attempt, fire.output.as_str()), (1, "HTTP 200: ok"), "one attempt, not a timeout: {fire:?}");
    assert_eq!(seen.load(Ordering::SeqCst), 2, "sent again after the stall");
    assert!(h.pause.stalls() >= 1);
    stop.cancel();
}

/// A claim held longer than its lease could last, with no stall seen and
/// steady heartbeats (a pause the detectors missed, a wall clock that
/// stepped): the monotonic clock says the lease may have lapsed, so the
/// claim is checked before the send, and a fire another node took over
/// meanwhile is not sent twice. Without the monotonic check it went out on
/// the node's belief.
#[tokio::test(flavor = "current_thread")]
async fn a_claim_whose_lease_could_have_lapsed_is_checked_before_it_is_sent() {
    for db in Db::ALL {
        a_claim_whose_lease_could_have_lapsed_is_checked_on(db).await;
    }
}

/// [`a_claim_whose_lease_could_have_lapsed_is_checked_before_it_is_sent`] on `db`.
async fn a_claim_whose_lease_could_have_lapsed_is_checked_on(db: Db) {
    let h = Harness::start_on(db, reconciler_config(), Callbacks::default(), Arc::new(Liveness::steady())).await;
    let t = h.timer("lapsed", TimerStatus::Enabled, MisfirePolicy::FireAll).await;
    let keys = h.fires(&t, &[-2_000, -1_000]).await;
    let held = h.executor.held_now();
    let claimed = h.repo.claim(&keys, "node-a:200", LEASE_MS as i64, T0).await.unwrap().claimed;
    assert_eq!(claimed.len(), 2);

    // Nearly the whole lease passes on the monotonic clock (the process
    // stood still unseen); node-b takes the first fire over meanwhile.
    tokio::time::pause();
    tokio::time::advance(Duration::from_millis(LEASE_MS - 1_000)).await;
    tokio::time::resume();
    h.repo.heartbeat(&node("node-a", T0 - 10_000)).await.unwrap();
    let taken = h.repo.reclaim(&[claimed[0].task_id], "node-b:1", LEASE_MS as i64, T0, T0 - 3_000).await.unwrap();
    assert_eq!(taken.claimed.len(), 1, "node-b took the first fire over");

    h.executor.dispatch(claimed, held).await.unwrap();
    h.receiver.wait_for(&keys[1..]).await;
    h.wait_for_status(&keys[1..], FireStatus::Succeeded).await;
    h.wait_idle().await;
    assert_eq!(h.receiver.hits(keys[0]), 0, "{db:?}: the fire node-b took over is not sent by node-a");
    assert_eq!(h.receiver.hits(keys[1]), 1, "{db:?}: node-a's own claim, checked and renewed, is sent");
    let first = h.fire(keys[0]).await;
    assert_eq!(first.status, FireStatus::Running, "{db:?}: node-b's claim stands: {first:?}");
}
