//! Results survive a long database outage: the recorder keeps them until
//! the database is back, so no fire of the outage is sent twice; past its
//! cap of results not written the executor claims nothing more; at
//! shutdown with the database still down the recorder gives up after its
//! deadline.
//!
//! The outage is a [`Flaky`] fire repository over SQLite, switched off
//! meanwhile (its calls fail at once, touching no database), so these
//! tests may pause tokio's clock through it: ten minutes pass in an
//! instant. Tokio's clock is paused only while the database is off, and
//! the `ManualClock` (leases, the reconciler) moves with it.

use std::sync::Arc;
use std::time::Duration;

use xtimer_core::config::ExecutorConfig;
use xtimer_core::fire::FireStatus;
use xtimer_executor::reconciler::ReconcileReport;
use xtimer_executor::recorder::SHUTDOWN_DEADLINE;

use crate::helpers::{Receiver, PATIENCE};
use crate::nodes::{count, executor_config, within, Cluster, Db, Flaky};

/// Ten minutes, in seconds.
const OUTAGE_S: u64 = 600;

/// A cluster whose fire repository is `Flaky`.
async fn flaky_cluster() -> (Cluster, Arc<Flaky>) {
    let mut c = Cluster::start(Db::Sqlite).await;
    let flaky = Flaky::over(c.repo.clone());
    c.stores.fires = flaky.clone();
    (c, flaky)
}

/// Moves tokio's (paused) clock and the `ManualClock` together by `secs`
/// seconds, a second at a time, letting the recorder retry at each step.
async fn pass(c: &Cluster, secs: u64) {
    for _ in 0..secs {
        c.clock.advance(1_000);
        tokio::time::advance(Duration::from_secs(1)).await;
    }
}

/// Fires go out, then the database goes away for ten minutes before their
/// results are written (their claims' leases run out meanwhile). Once it
/// is back every result is written, by the node that fired it, and the
/// reconciler finds nothing to fire again: each fire was sent once.
#[tokio::test]
async fn a_ten_minute_database_outage_sends_no_fire_twice() {
    let (c, flaky) = flaky_cluster().await;
    let receiver = Receiver::start().await;
    let timer = c.timer("steady", &format!("http://{}/hook", receiver.addr), None).await;
    let offsets: Vec<i64> = (0..20).map(|i| -100_000 + i * 5_000).collect();
    let keys = c.fires(&timer, &offsets).await;
    let node = c.node("node-a", ExecutorConfig { batch_size: 4, ..executor_config() });

    // The writes fail from the start, so no result gets in before the outage.
    flaky.records_down(true);
    assert_eq!(node.executor.claim_and_dispatch(&keys).await.unwrap(), 20);
    assert!(within(PATIENCE, || receiver.arrivals().len() == 20).await, "every fire was sent");
    node.wait_idle().await;

    // Ten minutes of outage: every call fails.
    flaky.all_down(true);
    tokio::time::pause();
    pass(&c, OUTAGE_S).await;
    assert!(node.reconciler.run_once().await.is_err(), "the database is still down");
    tokio::time::resume();
    flaky.all_down(false);
    flaky.records_down(false);

    c.wait_for_status(&keys, FireStatus::Succeeded).await;
    // The next reconciler period: the pass above held its lock.
    c.clock.advance(5_000);
    assert_eq!(node.reconciler.run_once().await.unwrap(), ReconcileReport::default(), "nothing reclaimed");
    node.wait_idle().await;
    let arrivals = receiver.arrivals();
    for key in &keys {
        assert_eq!(count(&arrivals, &key.to_string()), 1, "{key} sent once: {arrivals:?}");
        assert_eq!(c.fire(*key).await.attempt, 1, "{key}");
    }
}

/// With its cap of results waiting for the database the executor claims
/// nothing more (nor does the reconciler) and drops nothing; once they are
/// written it claims again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_past_its_cap_of_unwritten_results_stops_claiming_and_drops_none() {
    let (c, flaky) = flaky_cluster().await;
    let receiver = Receiver::start().await;
    let timer = c.timer("busy", &format!("http://{}/hook", receiver.addr), None).await;
    // batch_size 1: a cap of 16 results.
    let cap = xtimer_executor::recorder::PENDING_BATCHES;
    let offsets: Vec<i64> = (0..=cap as i64).map(|i| -100_000 + i * 1_000).collect();
    let keys = c.fires(&timer, &offsets).await;
    let (held, last) = keys.split_at(cap);
    let node = c.node("node-a", ExecutorConfig { batch_size: 1, ..executor_config() });

    flaky.records_down(true);
    assert_eq!(node.executor.claim_and_dispatch(held).await.unwrap(), cap);
    assert!(within(PATIENCE, || receiver.arrivals().len() == cap).await);
    node.wait_idle().await;
    assert!(node.executor.backlogged());
    assert_eq!(node.executor.claim_and_dispatch(last).await.unwrap(), 0, "no claim past the cap");
    assert_eq!(node.reconciler.run_once().await.unwrap(), ReconcileReport::default(), "nor a reclaim");
    assert_eq!(c.fire(last[0]).await.status, FireStatus::Pending);

    flaky.records_down(false);
    c.wait_for_status(held, FireStatus::Succeeded).await;
    assert!(within(PATIENCE, || !node.executor.backlogged()).await);
    assert_eq!(node.executor.claim_and_dispatch(last).await.unwrap(), 1, "claims again once written");
    c.wait_for_status(last, FireStatus::Succeeded).await;
    assert_eq!(receiver.arrivals().len(), cap + 1, "each fire sent once");
}

/// A node stopping while the database is down keeps trying to write its
/// results for the shutdown deadline, then gives up (and says how many):
/// its shutdown ends.
#[tokio::test]
async fn a_recorder_stopping_with_the_database_down_gives_up_after_its_deadline() {
    let (c, flaky) = flaky_cluster().await;
    let receiver = Receiver::start().await;
    let timer = c.timer("stopping", &format!("http://{}/hook", receiver.addr), None).await;
    let keys = c.fires(&timer, &[-3_000, -2_000, -1_000]).await;
    let node = c.node("node-a", executor_config());
    flaky.records_down(true);
    assert_eq!(node.executor.claim_and_dispatch(&keys).await.unwrap(), 3);
    assert!(within(PATIENCE, || receiver.arrivals().len() == 3).await);
    node.wait_idle().await;

    flaky.all_down(true);
    tokio::time::pause();
    let mut recorder = node.stop();
    pass(&c, SHUTDOWN_DEADLINE.as_secs() - 2).await;
    assert!(tokio::time::timeout(Duration::ZERO, &mut recorder).await.is_err(), "still trying within the deadline");
    pass(&c, 5).await;
    tokio::time::timeout(Duration::from_secs(1), recorder).await.expect("gave up after the deadline").unwrap();
}
