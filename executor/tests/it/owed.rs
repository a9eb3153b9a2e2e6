//! Owed notifications (`onFailure`, `onMissed`, `onLate`) are durable:
//! stored with the fire's result and sent once, by the node that recorded
//! it or, after it crashed, by another node's sweep. On SQLite, PostgreSQL
//! and MySQL, with a real HTTP receiver on loopback.

use std::time::Duration;

use serde_json::Value;
use xtimer_core::fire::FireStatus;
use xtimer_executor::FAILURE_NOTIFY_ATTEMPTS;
use xtimer_store::{FireResult, OwedKind, OwedNotification};

use crate::helpers::{Receiver, PATIENCE, T0};
use crate::nodes::{count, executor_config, http, within, Cluster, Db};
use xtimer_core::fire::ClaimedFire;
use xtimer_core::timer::{LateAlert, MisfirePolicy, Timer};

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

/// A timer calling `url` whose missed and late (past 1 s) fires are told
/// to `alerts`.
async fn alerting(c: &Cluster, name: &str, url: &str, alerts: &Receiver, misfire: MisfirePolicy) -> Timer {
    let hook = format!("http://{}/alert", alerts.addr);
    c.timer_with(name, url, |t| {
        t.misfire = misfire;
        t.on_missed = Some(http(&hook));
        t.on_late = Some(LateAlert { threshold_ms: 1_000, notify: http(&hook) });
    })
    .await
}

/// The notification of `kind` `claim` owes.
fn notice(claim: &ClaimedFire, kind: OwedKind, attempt: u32, output: &str) -> OwedNotification {
    OwedNotification {
        task_id: claim.task_id,
        kind,
        key: claim.key,
        manual: false,
        attempt,
        output: output.into(),
        sends: 0,
        owner: claim.owner.clone(),
    }
}

/// The bodies `alerts` received, by their `Idempotency-Key`'s suffix.
fn bodies(alerts: &Receiver) -> Vec<Value> {
    alerts.signed().iter().map(|(_, body)| serde_json::from_slice(body).unwrap()).collect()
}

/// A node recorded one fire missed and another sent 3 s late, each with
/// its alert owed, then crashed before sending them: another node's sweep
/// sends both once their lease lapsed, once each, with `_missed` and
/// `_late` and the `onFailure` body.
async fn missed_and_late_notices_left_by_a_crash_are_sent_once_by_another_nodes_sweep(db: Db) {
    let c = Cluster::start(db).await;
    let alerts = Receiver::start().await;
    let timer = alerting(&c, "crashed", REFUSING, &alerts, MisfirePolicy::Skip).await;
    let keys = c.fires(&timer, &[-2_000, -1_000]).await;
    let claims = c.stores.fires.claim(&keys, "node-dead:1", 60_000, T0 - 1_000).await.unwrap().claimed;
    let of = |key| claims.iter().find(|f| f.key == key).unwrap();
    let (missed, late) = (of(keys[0]), of(keys[1]));
    let result = |f: &ClaimedFire, status, attempt, output: &str, cost_time| FireResult {
        task_id: f.task_id,
        run_ms: f.key.run_ms,
        owner: f.owner.clone(),
        status,
        attempt,
        output: output.into(),
        cost_time,
        lease_until: None,
    };
    let results = [
        result(missed, FireStatus::Missed, 0, "missed: past its window", 0),
        result(late, FireStatus::Succeeded, 1, "HTTP 200: ok", 3_000),
    ];
    let owed = [
        notice(missed, OwedKind::Missed, 0, "missed: past its window"),
        notice(late, OwedKind::Late, 1, "sent 3000 ms late; HTTP 200: ok"),
    ];
    let recorded = c.stores.notifications.record_owing(&results, &owed, T0 + 15_000, T0).await.unwrap();
    assert_eq!((recorded.written, recorded.owed.len()), (2, 2));

    let node_b = c.node("node-b", executor_config());
    assert_eq!(node_b.sweeper.run_once().await.unwrap(), 0, "node-dead's lease has not lapsed yet");
    c.clock.advance(15_000);
    assert_eq!(node_b.sweeper.run_once().await.unwrap(), 2, "both taken once the lease lapsed");
    let want_missed = format!("{}_{}_missed", timer.id, keys[0].run_ms);
    let want_late = format!("{}_{}_late", timer.id, keys[1].run_ms);
    assert!(within(PATIENCE, || alerts.arrivals().len() >= 2).await, "both arrive");
    node_b.wait_idle().await;
    let node_c = c.node("node-c", executor_config());
    for node in [&node_b, &node_c] {
        c.clock.advance(60_000);
        assert_eq!(node.sweeper.run_once().await.unwrap(), 0);
    }
    node_c.wait_idle().await;
    let mut arrived = alerts.arrivals();
    arrived.sort();
    let mut want = vec![want_late, want_missed];
    want.sort();
    assert_eq!(arrived, want, "each sent once");
    for told in bodies(&alerts) {
        let (alert, run) = (told["alert"].as_str().unwrap(), told["runTimer"].as_i64().unwrap());
        let (fire, output) = match alert {
            "missed" => (missed, "missed: past its window"),
            _ => (late, "sent 3000 ms late; HTTP 200: ok"),
        };
        assert_eq!((run, told["taskId"].as_i64()), (fire.key.run_ms, Some(fire.task_id)), "{told}");
        assert_eq!((told["timerId"].as_i64(), told["output"].as_str()), (Some(timer.id), Some(output)), "{told}");
        assert_eq!(told["name"], "crashed", "{told}");
    }
}

/// The executor owes the alerts itself: a fire sent more than 1 s late
/// tells `onLate` once, one on time does not, and one past its window
/// under `skip` is recorded missed and tells `onMissed`.
async fn the_executor_tells_on_late_and_on_missed_once(db: Db) {
    let c = Cluster::start(db).await;
    let alerts = Receiver::start().await;
    let target = Receiver::start().await;
    let url = format!("http://{}/fire", target.addr);
    let timer = alerting(&c, "alerting", &url, &alerts, MisfirePolicy::Skip).await;
    // 5 s late, on time (due in 200 ms), and two minutes late (past the
    // default 60 s window: missed).
    let keys = c.fires(&timer, &[-5_000, 200, -120_000]).await;
    let node = c.node("node-a", executor_config());
    assert_eq!(node.executor.claim_and_dispatch(&keys).await.unwrap(), 3);
    c.wait_for_status(&keys[..2], FireStatus::Succeeded).await;
    c.wait_for_status(&keys[2..], FireStatus::Missed).await;
    let late = format!("{}_{}_late", timer.id, keys[0].run_ms);
    let missed = format!("{}_{}_missed", timer.id, keys[2].run_ms);
    assert!(within(PATIENCE, || alerts.arrivals().len() >= 2).await, "told without waiting for a sweep");
    node.wait_idle().await;
    c.clock.advance(60_000);
    assert_eq!(node.sweeper.run_once().await.unwrap(), 0, "nothing left owed");
    node.wait_idle().await;
    let mut arrived = alerts.arrivals();
    arrived.sort();
    let mut want = vec![late, missed];
    want.sort();
    assert_eq!(arrived, want, "once each; the on-time fire tells nothing");
    let told = bodies(&alerts).into_iter().find(|b| b["alert"] == "late").unwrap();
    let output = told["output"].as_str().unwrap();
    assert!(output.starts_with("sent ") && output.contains("(onLate.thresholdMs 1000); HTTP 200"), "{output}");
}

/// Fires the reconciler marks missed (no node could fire them in time)
/// owe their `onMissed` with the mark, and it is sent at once, once.
async fn the_reconcilers_missed_marks_tell_on_missed(db: Db) {
    let c = Cluster::start(db).await;
    let alerts = Receiver::start().await;
    let timer = alerting(&c, "overdue", REFUSING, &alerts, MisfirePolicy::Skip).await;
    let quiet = c.timer_with("quiet", REFUSING, |t| t.misfire = MisfirePolicy::Skip).await;
    let keys = c.fires(&timer, &[-120_000, -110_000]).await;
    c.fires(&quiet, &[-120_000]).await;
    let node = c.node("node-a", executor_config());
    let report = node.reconciler.run_once().await.unwrap();
    assert_eq!(report.missed, 3, "{report:?}");
    let want: Vec<String> = keys.iter().map(|k| format!("{}_{}_missed", timer.id, k.run_ms)).collect();
    assert!(within(PATIENCE, || alerts.arrivals().len() >= 2).await, "sent at once");
    node.wait_idle().await;
    c.clock.advance(60_000);
    assert_eq!(node.sweeper.run_once().await.unwrap(), 0, "nothing left owed");
    node.wait_idle().await;
    let mut arrived = alerts.arrivals();
    arrived.sort();
    assert_eq!(arrived, want, "once per missed fire of the timer with an onMissed");
    let told = &bodies(&alerts)[0];
    assert_eq!(told["alert"], "missed", "{told}");
    assert!(told["output"].as_str().unwrap().starts_with("missed: "), "{told}");
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
    missed_and_late_notices_left_by_a_crash_are_sent_once_by_another_nodes_sweep,
    the_executor_tells_on_late_and_on_missed_once,
    the_reconcilers_missed_marks_tell_on_missed,
);
