//! Owed notifications (`onFailure`) are durable: stored with the fire's
//! failed result and sent once, by the node that recorded it or, after it
//! crashed, by another node's sweep. On SQLite, PostgreSQL and MySQL, with
//! a real HTTP receiver on loopback.

use std::time::Duration;

use serde_json::Value;
use xtimer_core::fire::FireStatus;
use xtimer_executor::FAILURE_NOTIFY_ATTEMPTS;
use xtimer_store::{FireResult, OwedKind, OwedNotification};

use crate::helpers::{Receiver, PATIENCE, T0};
use crate::nodes::{count, executor_config, within, Cluster, Db};

/// A port nothing listens on: calls to it are refused at once.
const REFUSING: &str = "http://127.0.0.1:1/hook";

/// A node recorded a fire failed with its `onFailure` owed, then crashed
/// before sending it: another node's sweep sends it once its sender's
/// lease lapsed, once, with the fire's key and `_failure`.
async fn a_failure_notice_left_by_a_crash_is_sent_once_by_another_nodes_sweep(db: Db) {
    let c = Cluster::start(db).await;
    let alerts = Receiver::start().await;
    let timer = c.timer("crashed", REFUSING, Some(&format!("http://{}/failed", alerts.addr))).await;
    let key = c.fires(&timer, &[-1_000]).await[0];
    // node-dead claimed the fire, it failed, and its recorder wrote the
    // result with the notice owed (held by node-dead for 15 s); then it died.
    let claim = c.stores.fires.claim(&[key], "node-dead:1", 60_000, T0 - 1_000).await.unwrap().claimed.remove(0);
    let failed = FireResult {
        task_id: claim.task_id,
        run_ms: key.run_ms,
        owner: claim.owner.clone(),
        status: FireStatus::Failed,
        attempt: 1,
        output: "HTTP 500: down".into(),
        cost_time: 3,
        lease_until: None,
    };
    let owed = OwedNotification {
        task_id: claim.task_id,
        kind: OwedKind::Failure,
        key,
        manual: false,
        attempt: 1,
        output: "HTTP 500: down".into(),
        sends: 0,
        owner: claim.owner.clone(),
    };
    let recorded = c.stores.notifications.record_owing(&[failed], &[owed], T0 + 15_000, T0).await.unwrap();
    assert_eq!((recorded.written, recorded.owed.len()), (1, 1));

    let node_b = c.node("node-b", executor_config());
    assert_eq!(node_b.sweeper.run_once().await.unwrap(), 0, "node-dead's lease has not lapsed yet");
    c.clock.advance(15_000);
    assert_eq!(node_b.sweeper.run_once().await.unwrap(), 1, "taken once the lease lapsed");
    let want = format!("{}_{}_failure", timer.id, key.run_ms);
    assert!(within(PATIENCE, || count(&alerts.arrivals(), &want) > 0).await, "the notice arrives");
    node_b.wait_idle().await;

    // Sent and cleared: no later sweep, on any node, sends it again.
    let node_c = c.node("node-c", executor_config());
    for node in [&node_b, &node_c] {
        c.clock.advance(60_000);
        assert_eq!(node.sweeper.run_once().await.unwrap(), 0);
    }
    node_c.wait_idle().await;
    assert_eq!(alerts.arrivals(), [want], "sent once, with the fire's key and _failure");
    let (_, body) = alerts.signed().remove(0);
    let told: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((told["timerId"].as_i64(), told["runTimer"].as_i64()), (Some(timer.id), Some(key.run_ms)), "{told}");
    assert_eq!((told["taskId"].as_i64(), told["attempts"].as_i64()), (Some(claim.task_id), Some(1)), "{told}");
    assert_eq!((told["name"].as_str(), told["output"].as_str()), (Some("crashed"), Some("HTTP 500: down")), "{told}");
    assert_eq!(told["manual"], false, "{told}");
}

/// A fire that ends failed tells its timer's `onFailure` at once, by the
/// node that fired it, once: no sweep sends it again.
async fn a_failed_fire_tells_its_on_failure_once(db: Db) {
    let c = Cluster::start(db).await;
    let alerts = Receiver::start().await;
    let timer = c.timer("failing", REFUSING, Some(&format!("http://{}/failed", alerts.addr))).await;
    let quiet = c.timer("quiet", REFUSING, None).await;
    let key = c.fires(&timer, &[-1_000]).await[0];
    let other = c.fires(&quiet, &[-1_000]).await[0];

    let node_a = c.node("node-a", executor_config());
    assert_eq!(node_a.executor.claim_and_dispatch(&[key, other]).await.unwrap(), 2);
    let want = format!("{}_{}_failure", timer.id, key.run_ms);
    assert!(within(PATIENCE, || count(&alerts.arrivals(), &want) > 0).await, "told without waiting for a sweep");
    c.wait_for_status(&[key, other], FireStatus::Failed).await;
    node_a.wait_idle().await;

    let node_b = c.node("node-b", executor_config());
    for node in [&node_a, &node_b] {
        c.clock.advance(60_000);
        assert_eq!(node.sweeper.run_once().await.unwrap(), 0, "nothing left owed");
    }
    node_b.wait_idle().await;
    assert_eq!(alerts.arrivals(), [want], "once, and only for the timer with an onFailure");
}

/// A notice that cannot be delivered is given up after its attempts and
/// cleared: the sweep does not take it up again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_notice_that_cannot_be_delivered_is_given_up_after_its_attempts() {
    let c = Cluster::start(Db::Sqlite).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap();
    drop(listener);
    let timer = c.timer("nowhere", REFUSING, Some(&format!("http://{closed}/failed"))).await;
    let key = c.fires(&timer, &[-1_000]).await[0];
    let node = c.node("node-a", executor_config());
    assert_eq!(node.executor.claim_and_dispatch(&[key]).await.unwrap(), 1);
    c.wait_for_status(&[key], FireStatus::Failed).await;
    // Three sends, 0.25-0.5 s then 0.5-1 s apart.
    tokio::time::sleep(Duration::from_millis(200)).await;
    node.wait_idle().await;
    c.clock.advance(600_000);
    assert_eq!(node.sweeper.run_once().await.unwrap(), 0, "given up after {FAILURE_NOTIFY_ATTEMPTS} sends and cleared");
}

macro_rules! on_every_database {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(crate::nodes::Db::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(crate::nodes::Db::Postgres).await;
                }
            )*
        }
        mod mysql {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(crate::nodes::Db::Mysql).await;
                }
            )*
        }
    };
}

on_every_database!(
    a_failure_notice_left_by_a_crash_is_sent_once_by_another_nodes_sweep,
    a_failed_fire_tells_its_on_failure_once,
);
