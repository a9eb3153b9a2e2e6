//! Reconciler tests: a real SQLite file, a `ManualClock` that puts every
//! fire's run time in the past, and a real HTTP receiver on loopback. Each
//! test sets up fires directly in the repository, runs one pass with
//! `Reconciler::run_once`, then waits (with a deadline) for the callbacks and
//! the recorded results.

mod callbacks;
mod flows;
mod helpers;
mod http1;
mod nodes;
mod order;
mod outage;
mod owed;
mod stalls;
mod task_fires;

use xtimer_core::config::ReconcilerConfig;
use xtimer_core::fire::{FireKey, FireStatus};
use xtimer_core::node::NodeInfo;
use xtimer_core::timer::{MisfirePolicy, TimerStatus};
use xtimer_executor::reconciler::ReconcileReport;
use xtimer_store::{FireRepo, FireResult, NodeRepo, TimerRepo};

use helpers::{reconciler_config, Harness, LEASE_MS, T0};

fn report(fired: u64, missed: u64, skipped: u64) -> ReconcileReport {
    ReconcileReport { fired, missed, skipped }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_policy_marks_every_fire_later_than_the_threshold_missed() {
    let h = Harness::start(reconciler_config()).await;
    let t = h.timer("skip", TimerStatus::Enabled, MisfirePolicy::Skip).await;
    let keys = h.fires(&t, &[-150_000, -90_000, -60_000]).await;

    assert_eq!(h.reconciler.run_once().await.unwrap(), report(0, 3, 0));
    assert_eq!(h.executor.in_flight(), 0, "nothing was dispatched");
    for &k in &keys {
        let f = h.fire(k).await;
        assert_eq!((f.status, f.attempt, f.modify_time), (FireStatus::Missed, 0, T0), "{k}");
        assert!(f.output.starts_with("missed"), "{}", f.output);
    }
    assert_eq!(h.receiver.total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_all_fires_every_overdue_fire_exactly_once() {
    let h = Harness::start(reconciler_config()).await;
    let t = h.timer("all", TimerStatus::Enabled, MisfirePolicy::FireAll).await;
    let keys = h.fires(&t, &[-3_600_000, -50_000, -30_000, -10_000]).await;

    assert_eq!(h.reconciler.run_once().await.unwrap(), report(4, 0, 0));
    h.receiver.wait_for(&keys).await;
    h.wait_for_status(&keys, FireStatus::Succeeded).await;
    for &k in &keys {
        let f = h.fire(k).await;
        assert_eq!((f.attempt, f.output.as_str()), (1, "HTTP 200: ok"), "{k}");
        assert_eq!(f.cost_time, T0 - k.run_ms, "lateness by the injected clock");
    }

    // The next pass (the reconciler lock has lapsed) finds nothing left to do.
    h.clock.advance(h.config.period_ms as i64);
    assert_eq!(h.reconciler.run_once().await.unwrap(), report(0, 0, 0));
    h.wait_idle().await;
    for &k in &keys {
        assert_eq!(h.receiver.hits(k), 1, "{k} was sent once");
    }
    assert_eq!(h.receiver.total(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_later_than_the_grace_but_within_the_threshold_fires_under_every_policy() {
    // The defaults: a crash or a takeover a few seconds long is not a misfire.
    let h = Harness::start(ReconcilerConfig::default()).await;
    let mut keys = Vec::new();
    for (name, policy) in [("s", MisfirePolicy::Skip), ("o", MisfirePolicy::FireOnce), ("a", MisfirePolicy::FireAll)] {
        let t = h.timer(name, TimerStatus::Enabled, policy).await;
        keys.extend(h.fires(&t, &[-59_000, -30_000, -4_000]).await);
    }
    assert_eq!(h.reconciler.run_once().await.unwrap(), report(9, 0, 0));
    h.receiver.wait_for(&keys).await;
    h.wait_for_status(&keys, FireStatus::Succeeded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_once_fires_every_fire_within_the_threshold_and_only_the_latest_beyond_it() {
    let h = Harness::start(reconciler_config()).await;
    let recent = h.timer("recent", TimerStatus::Enabled, MisfirePolicy::FireOnce).await;
    // -1 s is within the grace period: it is the trigger's, not the reconciler's.
    let r = h.fires(&recent, &[-50_000, -30_000, -10_000, -1_000]).await;
    let stale = h.timer("stale", TimerStatus::Enabled, MisfirePolicy::FireOnce).await;
    let s = h.fires(&stale, &[-150_000, -90_000, -60_001]).await;
    // A timer with fires on both sides of the threshold: the recent one is its once.
    let both = h.timer("both", TimerStatus::Enabled, MisfirePolicy::FireOnce).await;
    let b = h.fires(&both, &[-120_000, -70_000, -20_000]).await;

    assert_eq!(h.reconciler.run_once().await.unwrap(), report(5, 4, 0));
    let sent = [r[0], r[1], r[2], s[2], b[2]];
    h.receiver.wait_for(&sent).await;
    h.wait_for_status(&sent, FireStatus::Succeeded).await;
    h.wait_idle().await;
    assert_eq!(h.receiver.total(), 5, "one callback per fired fire");
    for &k in &[s[0], s[1], b[0], b[1]] {
        assert_eq!(h.status(k).await, FireStatus::Missed, "{k}");
    }
    assert_eq!(h.status(r[3]).await, FireStatus::Pending, "a fire within the grace period is left alone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_once_fires_one_fire_per_timer_across_pages() {
    let config = ReconcilerConfig { page_size: 2, ..reconciler_config() };
    let h = Harness::start(config).await;
    let t = h.timer("paged", TimerStatus::Enabled, MisfirePolicy::FireOnce).await;
    let keys = h.fires(&t, &[-150_000, -120_000, -90_000]).await;

    let pass = h.reconciler.run_once().await.unwrap();
    h.wait_idle().await;
    h.receiver.wait_for(&keys[2..]).await;
    assert_eq!(h.receiver.total(), 1, "fire_once sends one callback: {pass:?}");
    assert_eq!(pass, report(1, 2, 0));
    assert_eq!((h.status(keys[0]).await, h.status(keys[1]).await), (FireStatus::Missed, FireStatus::Missed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_lease_is_reclaimed_and_fired_again() {
    let h = Harness::start(reconciler_config()).await;
    // Even under `skip`: a running fire was due and taken, so it is finished, not missed.
    let t = h.timer("crashed", TimerStatus::Enabled, MisfirePolicy::Skip).await;
    let k = h.fires(&t, &[-120_000]).await[0];
    let dead = h.repo.claim(&[k], "node-dead:0", LEASE_MS as i64, T0 - 120_500).await.unwrap();
    assert_eq!(dead.claimed.len(), 1); // lease ended at T0 - 60 s
    let dead = dead.claimed[0].clone();

    assert_eq!(h.reconciler.run_once().await.unwrap(), report(1, 0, 0));
    h.receiver.wait_for(&[k]).await;
    h.wait_for_status(&[k], FireStatus::Succeeded).await;
    let f = h.fire(k).await;
    assert_eq!((f.attempt, f.cost_time), (1, 120_000));

    // The dead node comes back with a stale result: it is fenced out.
    let stale = FireResult {
        task_id: dead.task_id,
        run_ms: dead.key.run_ms,
        owner: dead.owner.clone(),
        status: FireStatus::Failed,
        attempt: 1,
        output: "HTTP 500: stale".into(),
        cost_time: 1,
        lease_until: None,
    };
    assert_eq!(h.repo.record(&[stale], h.now()).await.unwrap(), 0);
    assert_eq!(h.status(k).await, FireStatus::Succeeded);
    h.wait_idle().await;
    assert_eq!(h.receiver.hits(k), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_nodes_claim_is_taken_over_within_the_node_timeout_not_its_lease() {
    // The defaults: a node silent for 3 s is dead.
    let h = Harness::start(ReconcilerConfig::default()).await;
    let t = h.timer("taken-over", TimerStatus::Enabled, MisfirePolicy::FireOnce).await;
    let live = h.timer("live", TimerStatus::Enabled, MisfirePolicy::FireOnce).await;
    let k = h.fires(&t, &[-2_000]).await[0];
    let l = h.fires(&live, &[-2_000]).await[0];
    let beat = |id: &str, at: i64| NodeInfo {
        id: id.into(),
        host: "h".into(),
        listen: "127.0.0.1:1".into(),
        started_at: T0 - 60_000,
        heartbeat_at: at,
        shards: Vec::new(),
    };
    // node-dead claimed its fire 500 ms ahead and then went silent; node-live keeps beating.
    h.repo.heartbeat(&beat("node-dead", T0 - 2_600)).await.unwrap();
    h.repo.heartbeat(&beat("node-live", T0)).await.unwrap();
    assert_eq!(h.repo.claim(&[k], "node-dead:7", LEASE_MS as i64, T0 - 2_500).await.unwrap().claimed.len(), 1);
    assert_eq!(h.repo.claim(&[l], "node-live:7", LEASE_MS as i64, T0 - 2_500).await.unwrap().claimed.len(), 1);

    // 2.6 s of silence: not dead yet.
    assert_eq!(h.reconciler.run_once().await.unwrap(), report(0, 0, 0));
    // Past 3 s of silence (a minute before its lease ends): taken over and fired.
    h.clock.advance(h.config.period_ms as i64);
    h.repo.heartbeat(&beat("node-live", h.now())).await.unwrap();
    assert_eq!(h.reconciler.run_once().await.unwrap(), report(1, 0, 0));
    h.receiver.wait_for(&[k]).await;
    h.wait_for_status(&[k], FireStatus::Succeeded).await;
    assert_eq!(h.status(l).await, FireStatus::Running, "a live node's claim is its own");
    assert_eq!(h.receiver.hits(l), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_fire_with_a_live_lease_is_left_alone() {
    let h = Harness::start(reconciler_config()).await;
    let busy = h.timer("busy", TimerStatus::Enabled, MisfirePolicy::FireAll).await;
    let held = h.fires(&busy, &[-10_000]).await[0];
    let other = h.timer("other", TimerStatus::Enabled, MisfirePolicy::FireAll).await;
    let control = h.fires(&other, &[-20_000]).await[0];
    let owner = h.repo.claim(&[held], "node-b:7", LEASE_MS as i64, T0 - 10_000).await.unwrap().claimed.remove(0);

    assert_eq!(h.reconciler.run_once().await.unwrap(), report(1, 0, 0), "only the pending fire");
    h.receiver.wait_for(&[control]).await;
    h.wait_for_status(&[control], FireStatus::Succeeded).await;
    h.wait_idle().await;
    assert_eq!(h.receiver.hits(held), 0, "the held fire was not sent by the reconciler");
    assert_eq!(h.status(held).await, FireStatus::Running);

    // Its owner still holds it: the owner's result is the one written.
    let result = FireResult {
        task_id: owner.task_id,
        run_ms: owner.key.run_ms,
        owner: owner.owner.clone(),
        status: FireStatus::Succeeded,
        attempt: 1,
        output: "HTTP 200: by node-b".into(),
        cost_time: 3,
        lease_until: None,
    };
    assert_eq!(h.repo.record(&[result], h.now()).await.unwrap(), 1);
    let f = h.fire(held).await;
    assert_eq!((f.status, f.output.as_str()), (FireStatus::Succeeded, "HTTP 200: by node-b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overdue_fires_of_disabled_and_deleted_timers_are_skipped() {
    let h = Harness::start(reconciler_config()).await;
    let off = h.timer("off", TimerStatus::Enabled, MisfirePolicy::FireAll).await;
    let gone = h.timer("gone", TimerStatus::Enabled, MisfirePolicy::FireAll).await;
    let mut keys = h.fires(&off, &[-40_000, -20_000]).await;
    keys.extend(h.fires(&gone, &[-30_000]).await);
    // A running fire whose owner died after its timer was disabled.
    let crashed = h.fires(&off, &[-180_000]).await[0];
    assert_eq!(h.repo.claim(&[crashed], "node-dead:0", 1_000, T0 - 180_000).await.unwrap().claimed.len(), 1);
    assert!(h.repo.set_timer_status(gone.id, TimerStatus::Deleted, T0).await.unwrap());
    assert!(h.repo.set_timer_status(off.id, TimerStatus::Disabled, T0).await.unwrap());
    keys.push(crashed);

    assert_eq!(h.reconciler.run_once().await.unwrap(), report(0, 0, 4));
    assert_eq!(h.executor.in_flight(), 0);
    for &k in &keys {
        let f = h.fire(k).await;
        assert_eq!(f.status, FireStatus::Skipped, "{k}");
        assert!(f.output.starts_with("skipped"), "{}", f.output);
    }
    assert_eq!(h.receiver.total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_timer_overdue_fires_are_skipped_whatever_the_policy() {
    let h = Harness::start(reconciler_config()).await;
    let mut keys = Vec::new();
    for (name, policy) in [("skip", MisfirePolicy::Skip), ("once", MisfirePolicy::FireOnce)] {
        let t = h.timer(name, TimerStatus::Disabled, policy).await;
        keys.extend(h.fires(&t, &[-40_000, -20_000]).await);
    }

    let pass = h.reconciler.run_once().await.unwrap();
    let mut got = Vec::new();
    for &k in &keys {
        got.push((k, h.status(k).await));
    }
    assert!(got.iter().all(|(_, s)| *s == FireStatus::Skipped), "{got:?} after {pass:?}");
    assert_eq!(pass, report(0, 0, 4));
    assert_eq!(h.receiver.total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_sweeps_per_period() {
    let h = Harness::start(reconciler_config()).await;
    let t = h.timer("t", TimerStatus::Enabled, MisfirePolicy::FireAll).await;
    let first = h.fires(&t, &[-30_000]).await;
    assert_eq!(h.reconciler.run_once().await.unwrap(), report(1, 0, 0));
    h.receiver.wait_for(&first).await;

    let late: Vec<FireKey> = h.fires(&t, &[-20_000]).await;
    let node_b = h.reconciler("node-b");
    assert_eq!(node_b.run_once().await.unwrap(), report(0, 0, 0), "node-a holds the sweep for this period");
    assert_eq!(h.status(late[0]).await, FireStatus::Pending);

    h.clock.advance(h.config.period_ms as i64);
    assert_eq!(node_b.run_once().await.unwrap(), report(1, 0, 0), "the next period is anyone's");
    h.receiver.wait_for(&late).await;
    h.wait_for_status(&[first[0], late[0]], FireStatus::Succeeded).await;
    h.wait_idle().await;
    assert_eq!(h.receiver.total(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_fires_of_one_timer_leave_in_run_time_order() {
    // A timer whose last 25 fires (2 s apart) were held up by an outage (all within
    // the misfire threshold, so all fire), and a second timer with fires
    // interleaved in time: each timer's fires reach the receiver oldest first.
    let h = Harness::start(reconciler_config()).await;
    let t = h.timer("late", TimerStatus::Enabled, MisfirePolicy::FireOnce).await;
    let u = h.timer("other", TimerStatus::Enabled, MisfirePolicy::FireAll).await;
    let offsets: Vec<i64> = (0..25).map(|i| -55_000 + i * 2_000).collect();
    let mine = h.fires(&t, &offsets).await;
    let shifted: Vec<i64> = offsets.iter().map(|o| o + 1_000).collect();
    let theirs = h.fires(&u, &shifted).await;

    assert_eq!(h.reconciler.run_once().await.unwrap(), report(50, 0, 0));
    h.receiver.wait_for(&mine).await;
    h.receiver.wait_for(&theirs).await;
    h.wait_idle().await;
    let arrivals = h.receiver.arrivals();
    assert_eq!(arrivals.len(), 50, "each fire once: {arrivals:?}");
    for keys in [&mine, &theirs] {
        let want: Vec<String> = keys.iter().map(ToString::to_string).collect();
        let got: Vec<String> = arrivals.iter().filter(|k| want.contains(k)).cloned().collect();
        assert_eq!(got, want, "timer {}'s fires in run-time order", keys[0].timer_id);
    }
}

/// A one-shot's fire uses the definition its expansion handed over instead
/// of reading it (shown by a handed-over copy that calls elsewhere), and
/// reads it when the copy is older than the timer's last change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_fires_with_its_handed_over_definition_unless_the_timer_changed_since() {
    let h = Harness::start(reconciler_config()).await;
    let elsewhere = helpers::Receiver::start().await;
    let url = format!("http://{}/hook", h.receiver.addr);
    let other_url = format!("http://{}/hook", elsewhere.addr);
    let current = h.one_shot_to("current", T0 - 1_000, &url).await;
    let stale = h.one_shot_to("stale", T0 - 1_000, &url).await;
    let calling_elsewhere = |timer: &xtimer_core::timer::Timer, modify_time: i64| {
        let mut copy = timer.clone();
        if let xtimer_core::timer::Notify::Http(notify) = &mut copy.notify {
            notify.url = other_url.clone();
        }
        copy.modify_time = modify_time;
        copy
    };
    h.handover.give(&calling_elsewhere(&current, current.modify_time));
    h.handover.give(&calling_elsewhere(&stale, stale.modify_time - 1));
    let keys = [h.fires(&current, &[-1_000]).await[0], h.fires(&stale, &[-1_000]).await[0]];

    assert_eq!(h.executor.claim_and_dispatch(&keys).await.unwrap(), 2);
    h.wait_for_status(&keys, FireStatus::Succeeded).await;
    assert_eq!(elsewhere.hits(keys[0]), 1, "the handed-over definition was used");
    assert_eq!(h.receiver.hits(keys[0]), 0);
    assert_eq!(h.receiver.hits(keys[1]), 1, "a definition older than the timer's last change is read again");
    assert_eq!(elsewhere.hits(keys[1]), 0);
    assert!(h.handover.is_empty(), "both were taken: one used, one dropped");
}
