//! `FireRepo` conformance: insert, claim, record, release, reclaim, sweep.

use xtimer_core::fire::{ClaimedFire, FireKey, FireStatus};
use xtimer_core::node::NodeInfo;
use xtimer_core::timer::TimerStatus;
use xtimer_store::{BackfillFire, FireWindow, NewFire, Overdue};

use crate::helpers::{claim_all, fire, insert, key, result, succeeded, timer, Backend, APP, T0};

/// Run times of `keys`.
fn runs(keys: &[FireKey]) -> Vec<i64> {
    keys.iter().map(|k| k.run_ms).collect()
}

pub async fn insert_fires_is_idempotent(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let new = |offsets: &[i64]| -> Vec<NewFire> {
        offsets.iter().map(|&o| NewFire { key: key(&t, T0 + o), app: APP.into() }).collect()
    };
    assert_eq!(b.fires.insert_fires(&new(&[1_000, 2_000, 3_000]), b.now()).await.unwrap(), 3);
    b.clock.advance(500);
    assert_eq!(b.fires.insert_fires(&new(&[1_000, 2_000, 3_000]), b.now()).await.unwrap(), 0, "all exist");
    assert_eq!(b.fires.insert_fires(&new(&[2_000, 4_000]), b.now()).await.unwrap(), 1, "only the new one");
    assert_eq!(b.fires.insert_fires(&[], b.now()).await.unwrap(), 0);

    let (list, total) = b.fires.list_fires(t.id, None, 0, 100).await.unwrap();
    assert_eq!(total, 4);
    for f in &list {
        assert_eq!((f.timer_id, f.app.as_str(), f.status, f.attempt), (t.id, APP, FireStatus::Pending, 0));
        assert_eq!((f.output.as_str(), f.cost_time), ("", 0));
        let created = if f.run_ms == T0 + 4_000 { T0 + 500 } else { T0 };
        assert_eq!((f.create_time, f.modify_time), (created, created), "a repeat insert leaves rows untouched");
    }

    // Re-expanding the window must never reset a fire that is already under way.
    let claimed = claim_all(&b, &[key(&t, T0 + 1_000)], "node-a:1", 60_000).await;
    assert_eq!(b.fires.insert_fires(&new(&[1_000]), b.now()).await.unwrap(), 0);
    let f = fire(&b, key(&t, T0 + 1_000)).await;
    assert_eq!((f.task_id, f.status), (claimed[0].task_id, FireStatus::Running));
}

pub async fn pending_between_is_a_half_open_window_with_a_timer_filter(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let u = timer(&b, "u", TimerStatus::Enabled).await;
    insert(&b, &t, &[T0 + 3_000, T0, T0 + 2_000, T0 + 1_000]).await;
    insert(&b, &u, &[T0 + 1_000]).await;
    claim_all(&b, &[key(&t, T0 + 2_000)], "node-a:1", 60_000).await;

    let all = b.fires.pending_between(None, T0, T0 + 3_000, 100).await.unwrap();
    assert!(all.windows(2).all(|w| w[0].run_ms <= w[1].run_ms), "by run time: {all:?}");
    let mut sorted = all.clone();
    sorted.sort();
    let mut expected = vec![key(&t, T0), key(&t, T0 + 1_000), key(&u, T0 + 1_000)];
    expected.sort();
    assert_eq!(sorted, expected, "pending only, end exclusive, every timer");

    let only_t = b.fires.pending_between(Some(t.id), T0, T0 + 10_000, 100).await.unwrap();
    assert_eq!(only_t, vec![key(&t, T0), key(&t, T0 + 1_000), key(&t, T0 + 3_000)]);
    let only_u = b.fires.pending_between(Some(u.id), T0, T0 + 10_000, 100).await.unwrap();
    assert_eq!(only_u, vec![key(&u, T0 + 1_000)]);
    assert_eq!(
        runs(&b.fires.pending_between(Some(t.id), T0 + 1, T0 + 3_001, 100).await.unwrap()),
        [T0 + 1_000, T0 + 3_000]
    );
    assert_eq!(b.fires.pending_between(None, T0, T0 + 10_000, 1).await.unwrap(), vec![key(&t, T0)], "limit");
    assert!(b.fires.pending_between(None, T0 + 3_001, T0 + 10_000, 100).await.unwrap().is_empty());
}

pub async fn claim_is_a_compare_and_set(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0 + 1_000, T0 + 2_000]).await;

    let first = b.fires.claim(&keys, "node-a:1", 60_000, b.now()).await.unwrap();
    assert_eq!(first.skipped, 0);
    let mut won: Vec<FireKey> = first.claimed.iter().map(|c| c.key).collect();
    won.sort();
    assert_eq!(won, keys);
    for c in &first.claimed {
        assert_eq!((c.owner.as_str(), c.attempt), ("node-a:1", 0));
        let f = fire(&b, c.key).await;
        assert_eq!((f.task_id, f.status, f.modify_time), (c.task_id, FireStatus::Running, b.now()));
    }

    let second = b.fires.claim(&keys, "node-b:1", 60_000, b.now()).await.unwrap();
    assert_eq!((second.claimed.len(), second.skipped), (0, 0), "a claimed fire is not claimed twice");
    let again = b.fires.claim(&keys, "node-a:1", 60_000, b.now()).await.unwrap();
    assert!(again.claimed.is_empty(), "not even by the same owner");

    let third = insert(&b, &t, &[T0 + 3_000]).await;
    let unknown = key(&t, T0 + 9_999);
    let mixed = b.fires.claim(&[keys[0], third[0], unknown, keys[1]], "node-b:2", 60_000, b.now()).await.unwrap();
    assert_eq!(mixed.claimed.len(), 1, "only the pending one: {mixed:?}");
    assert_eq!((mixed.claimed[0].key, mixed.claimed[0].owner.as_str()), (third[0], "node-b:2"));
    assert_eq!(mixed.skipped, 0);
}

pub async fn claim_skips_fires_of_disabled_and_deleted_timers(b: Backend) {
    let on = timer(&b, "on", TimerStatus::Enabled).await;
    let off = timer(&b, "off", TimerStatus::Disabled).await;
    let gone = timer(&b, "gone", TimerStatus::Enabled).await;
    let run = T0 + 1_000;
    let keys = [key(&on, run), key(&off, run), key(&gone, run)];
    insert(&b, &on, &[run]).await;
    insert(&b, &off, &[run]).await;
    insert(&b, &gone, &[run]).await;
    assert!(b.timers.set_timer_status(gone.id, TimerStatus::Deleted, b.now()).await.unwrap());

    b.clock.advance(700);
    let outcome = b.fires.claim(&keys, "node-a:1", 60_000, b.now()).await.unwrap();
    assert_eq!(outcome.claimed.iter().map(|c| c.key).collect::<Vec<_>>(), vec![key(&on, run)]);
    assert_eq!(outcome.skipped, 2);
    for k in &keys[1..] {
        let f = fire(&b, *k).await;
        assert_eq!((f.status, f.attempt, f.modify_time), (FireStatus::Skipped, 0, b.now()), "{k}");
        assert!(!f.output.is_empty(), "a skipped fire says why");
    }

    // Skipped is final: enabling the timer later does not revive the fire.
    assert!(b.timers.set_timer_status(off.id, TimerStatus::Enabled, b.now()).await.unwrap());
    let later = b.fires.claim(&keys[1..2], "node-a:2", 60_000, b.now()).await.unwrap();
    assert_eq!((later.claimed.len(), later.skipped), (0, 0));
    assert_eq!(fire(&b, keys[1]).await.status, FireStatus::Skipped);
}

pub async fn claim_lease_runs_from_the_run_time(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let run = T0 + 5_000;
    let k = insert(&b, &t, &[run]).await[0];
    // Claimed ahead of its time, as the trigger does: the lease counts from
    // the run time, not from the claim.
    let claimed = claim_all(&b, &[k], "node-a:1", 10_000).await;
    let none_pending = T0 - 1;

    assert!(b.fires.overdue(none_pending, run + 9_999, 0, 100).await.unwrap().is_empty(), "lease still live");
    let ids = [claimed[0].task_id];
    let early = b.fires.reclaim(&ids, "node-b:1", 10_000, run + 9_999, 0).await.unwrap();
    assert_eq!((early.claimed.len(), early.skipped), (0, 0), "a live lease is not taken over");

    let overdue = b.fires.overdue(none_pending, run + 10_001, 0, 100).await.unwrap();
    assert_eq!(
        overdue,
        vec![Overdue { task_id: claimed[0].task_id, key: k, status: FireStatus::Running, backfill: false }]
    );

    // Claimed after its time (a backlog): the lease counts from the claim, so
    // the fire is not overdue the moment it is claimed.
    let late = insert(&b, &t, &[T0 - 30_000]).await[0];
    let late_claim = claim_all(&b, &[late], "node-a:2", 10_000).await;
    let overdue = b.fires.overdue(none_pending - 60_000, T0 + 9_999, 0, 100).await.unwrap();
    assert!(overdue.iter().all(|o| o.task_id != late_claim[0].task_id), "a late claim gets a whole lease");
}

pub async fn a_dead_nodes_claims_are_taken_over_before_their_lease_ends(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let run = T0 + 1_000;
    let keys = insert(&b, &t, &[run, run + 1_000, run + 2_000]).await;
    let node = |id: &str, at: i64| NodeInfo {
        id: id.into(),
        host: "h".into(),
        listen: "127.0.0.1:1".into(),
        started_at: T0,
        heartbeat_at: at,
        shards: Vec::new(),
    };
    // node-a dies after its heartbeat at T0; node-ab (a longer id with the
    // same start) keeps beating; node-x never reported.
    b.nodes.heartbeat(&node("node-a", T0)).await.unwrap();
    b.nodes.heartbeat(&node("node-ab", run + 5_000)).await.unwrap();
    let dead = claim_all(&b, &keys[..1], "node-a:1", 60_000).await;
    let alive = claim_all(&b, &keys[1..2], "node-ab:1", 60_000).await;
    let unknown = claim_all(&b, &keys[2..], "node-x:1", 60_000).await;

    // At run + 5 s every lease is live; node-a has been silent for 6 s.
    let now = run + 5_000;
    let alive_since = now - 3_000;
    let overdue = b.fires.overdue(T0 - 1, now, alive_since, 100).await.unwrap();
    assert_eq!(
        overdue,
        vec![Overdue { task_id: dead[0].task_id, key: keys[0], status: FireStatus::Running, backfill: false }]
    );
    let ids = [dead[0].task_id, alive[0].task_id, unknown[0].task_id];
    let taken = b.fires.reclaim(&ids, "node-b:1", 60_000, now, alive_since).await.unwrap();
    assert_eq!(taken.claimed.iter().map(|c| c.key).collect::<Vec<_>>(), vec![keys[0]], "only the dead node's");
    assert_eq!(fire(&b, keys[1]).await.status, FireStatus::Running);

    // The old owner's late result is fenced off; the new owner's counts.
    assert_eq!(b.fires.record(&[succeeded(&dead[0], 1)], now).await.unwrap(), 0);
    assert_eq!(b.fires.record(&[succeeded(&taken.claimed[0], 1)], now).await.unwrap(), 1);
}

pub async fn confirm_claims_keeps_only_claims_still_owned_and_refreshes_the_heartbeat(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let run = T0 + 1_000;
    let keys = insert(&b, &t, &[run, run + 1_000, run + 2_000]).await;
    let node = |id: &str, at: i64| NodeInfo {
        id: id.into(),
        host: "h".into(),
        listen: "127.0.0.1:1".into(),
        started_at: T0,
        heartbeat_at: at,
        shards: Vec::new(),
    };
    b.nodes.heartbeat(&node("node-a", T0)).await.unwrap();
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    // node-a stood still: 6 s later node-b takes its first fire over; its
    // second fire ended (someone wrote a result under node-a's token).
    let now = run + 5_000;
    let taken = b.fires.reclaim(&[claims[0].task_id], "node-b:1", 60_000, now, now - 3_000).await.unwrap();
    assert_eq!(taken.claimed.len(), 1);
    assert_eq!(b.fires.record(&[succeeded(&claims[1], 1)], now).await.unwrap(), 1);

    let later = now + 100_000;
    let held = b.fires.confirm_claims("node-a", &claims, 60_000, later).await.unwrap();
    assert_eq!(held, vec![claims[2].task_id], "only the claim still running under its token");
    assert_eq!(b.fires.confirm_claims("node-a", &[], 60_000, later).await.unwrap(), Vec::<i64>::new());
    let beat = b.nodes.list_nodes(0).await.unwrap().into_iter().find(|n| n.id == "node-a").unwrap();
    assert_eq!(beat.heartbeat_at, later, "the check wrote node-a's heartbeat first");
    // Its lease was extended: still not overdue just before the new lease ends.
    let no_pending = T0 - 1;
    let overdue = b.fires.overdue(no_pending, later + 59_999, 0, 100).await.unwrap();
    assert!(overdue.iter().all(|o| o.task_id != claims[2].task_id), "lease extended: {overdue:?}");
    let overdue = b.fires.overdue(no_pending, later + 60_001, 0, 100).await.unwrap();
    assert!(overdue.iter().any(|o| o.task_id == claims[2].task_id), "{overdue:?}");
    // A forged token confirms nothing.
    let forged = ClaimedFire { owner: "node-a:2".into(), ..claims[2].clone() };
    assert!(b.fires.confirm_claims("node-a", &[forged], 60_000, later).await.unwrap().is_empty());
}

pub async fn the_database_clock_is_read_where_nodes_share_the_database(b: Backend) {
    let system = xtimer_core::SystemClock;
    let before = xtimer_core::Clock::now_ms(&system);
    let read = b.nodes.database_now_ms().await.unwrap();
    let after = xtimer_core::Clock::now_ms(&system);
    // None on the embedded default (one node: its own clock is the only
    // one); elsewhere the server runs on this machine, so its clock reads as
    // this one's.
    if let Some(ms) = read {
        assert!((before - 50..=after + 50).contains(&ms), "{before} <= {ms} <= {after}");
    }
}

pub async fn a_caller_whose_heartbeats_are_not_steady_takes_no_running_fire(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0]).await;
    let claims = claim_all(&b, &keys, "node-a:1", 10_000).await;
    // The lease ended long ago (a database outage), but the caller's own
    // heartbeats are not steady yet: the owner's results come first.
    let now = T0 + 600_000;
    assert!(b.fires.overdue(T0 - 1, now, i64::MIN, 100).await.unwrap().is_empty());
    let taken = b.fires.reclaim(&[claims[0].task_id], "node-b:1", 10_000, now, i64::MIN).await.unwrap();
    assert!(taken.claimed.is_empty(), "{taken:?}");
    assert_eq!(b.fires.record(&[succeeded(&claims[0], 1)], now).await.unwrap(), 1, "the owner's result is written");
}

pub async fn record_is_fenced_by_the_claim_owner(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0, T0 + 1_000]).await;
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    let (c0, c1) = (&claims[0], &claims[1]);

    b.clock.advance(1_200);
    let forged = ClaimedFire { owner: "node-b:9".into(), ..c0.clone() };
    assert_eq!(b.fires.record(&[succeeded(&forged, 1)], b.now()).await.unwrap(), 0, "not the owner");
    let f = fire(&b, c0.key).await;
    assert_eq!((f.status, f.attempt, f.output.as_str()), (FireStatus::Running, 0, ""));

    let stale = ClaimedFire { owner: "node-b:9".into(), ..c1.clone() };
    let batch = [succeeded(c0, 7), result(&stale, FireStatus::Failed, 1, "HTTP 500", 3, None)];
    assert_eq!(b.fires.record(&batch, b.now()).await.unwrap(), 1, "each result is fenced on its own");
    let f = fire(&b, c0.key).await;
    assert_eq!((f.status, f.attempt, f.output.as_str()), (FireStatus::Succeeded, 1, "HTTP 200: ok"));
    assert_eq!((f.cost_time, f.modify_time), (7, b.now()));
    assert_eq!(fire(&b, c1.key).await.status, FireStatus::Running, "the forged failure was not written");

    b.clock.advance(100);
    let late = result(c0, FireStatus::Failed, 2, "HTTP 500", 9, None);
    assert_eq!(b.fires.record(&[late], b.now()).await.unwrap(), 0, "a final fire is not rewritten");
    let f = fire(&b, c0.key).await;
    assert_eq!((f.status, f.attempt, f.cost_time, f.modify_time), (FireStatus::Succeeded, 1, 7, b.now() - 100));
}

pub async fn retry_record_keeps_running_and_the_first_cost_time(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let k = insert(&b, &t, &[T0]).await[0];
    let c = &claim_all(&b, &[k], "node-a:1", 60_000).await[0];
    let none_pending = T0 - 1;

    b.clock.advance(120);
    let retry_lease = T0 + 100_000;
    let first = result(c, FireStatus::Running, 1, "HTTP 500: boom", 120, Some(retry_lease));
    assert_eq!(b.fires.record(&[first], b.now()).await.unwrap(), 1);
    let f = fire(&b, k).await;
    assert_eq!((f.status, f.attempt, f.output.as_str(), f.cost_time), (FireStatus::Running, 1, "HTTP 500: boom", 120));
    // The retry moved the lease from run + 60 s to `retry_lease`.
    assert!(b.fires.overdue(none_pending, T0 + 60_001, 0, 100).await.unwrap().is_empty());
    assert!(b.fires.overdue(none_pending, retry_lease - 1, 0, 100).await.unwrap().is_empty());
    assert_eq!(b.fires.overdue(none_pending, retry_lease + 1, 0, 100).await.unwrap().len(), 1);

    b.clock.advance(2_000);
    let second = result(c, FireStatus::Running, 2, "HTTP 502", 2_120, Some(retry_lease + 5_000));
    assert_eq!(b.fires.record(&[second], b.now()).await.unwrap(), 1, "the owner keeps its claim across retries");
    b.clock.advance(4_000);
    let last = result(c, FireStatus::Failed, 3, "HTTP 503", 6_120, None);
    assert_eq!(b.fires.record(&[last], b.now()).await.unwrap(), 1);
    let f = fire(&b, k).await;
    assert_eq!((f.status, f.attempt, f.output.as_str()), (FireStatus::Failed, 3, "HTTP 503"));
    assert_eq!((f.cost_time, f.modify_time), (120, b.now()), "cost_time is the first attempt's lateness");
    assert!(b.fires.overdue(none_pending, b.now() + 1_000_000, 0, 100).await.unwrap().is_empty(), "final fires rest");
}

pub async fn record_applies_results_of_one_fire_in_order(b: Backend) {
    // A retry with no backoff can put two results of one fire in one
    // group-committed batch; they must apply as if written one by one.
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0, T0 + 1]).await;
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    b.clock.advance(50);
    let mut batch = Vec::new();
    for c in &claims {
        batch.push(result(c, FireStatus::Running, 1, "HTTP 500", 50, Some(T0 + 90_000)));
        batch.push(result(c, FireStatus::Failed, 2, "HTTP 503", 80, None));
    }
    b.fires.record(&batch, b.now()).await.unwrap();
    for c in &claims {
        let f = fire(&b, c.key).await;
        assert_eq!(
            (f.status, f.attempt, f.output.as_str(), f.cost_time),
            (FireStatus::Failed, 2, "HTTP 503", 50),
            "the later result wins, the first attempt's cost stays"
        );
    }
}

pub async fn release_gives_back_only_to_the_owner(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0 + 1_000, T0 + 2_000]).await;
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;

    let forged: Vec<ClaimedFire> =
        claims.iter().map(|c| ClaimedFire { owner: "node-b:1".into(), ..c.clone() }).collect();
    assert_eq!(b.fires.release(&forged, b.now()).await.unwrap(), 0);
    assert_eq!(fire(&b, keys[0]).await.status, FireStatus::Running);

    b.clock.advance(300);
    assert_eq!(b.fires.release(&claims, b.now()).await.unwrap(), 2);
    for k in &keys {
        let f = fire(&b, *k).await;
        assert_eq!((f.status, f.attempt, f.modify_time), (FireStatus::Pending, 0, b.now()));
    }
    assert_eq!(b.fires.pending_between(Some(t.id), T0, T0 + 10_000, 10).await.unwrap(), keys);
    assert_eq!(b.fires.release(&claims, b.now()).await.unwrap(), 0, "nothing left to give back");

    // Released fires are claimable again; the old owner can no longer touch them.
    let retaken = claim_all(&b, &keys, "node-b:2", 60_000).await;
    assert_eq!(b.fires.release(&claims, b.now()).await.unwrap(), 0);
    assert_eq!(b.fires.record(&[succeeded(&claims[0], 1)], b.now()).await.unwrap(), 0);
    assert_eq!(b.fires.record(&[succeeded(&retaken[0], 1)], b.now()).await.unwrap(), 1);
    assert_eq!(b.fires.release(&retaken[..1], b.now()).await.unwrap(), 0, "a final fire is not given back");
    assert_eq!(fire(&b, retaken[0].key).await.status, FireStatus::Succeeded);
}

pub async fn overdue_finds_late_pending_and_expired_leases_only(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let u = timer(&b, "u", TimerStatus::Enabled).await;
    let late = insert(&b, &t, &[T0 - 10_000]).await[0];
    insert(&b, &t, &[T0 - 1_000, T0 + 5_000]).await; // within grace; in the future
    let expired = insert(&b, &t, &[T0 - 100_000]).await[0];
    let live = insert(&b, &t, &[T0 - 20_000]).await[0];
    let done = insert(&b, &t, &[T0 - 50_000]).await[0];
    let missed = insert(&b, &t, &[T0 - 40_000]).await[0];
    let other = insert(&b, &u, &[T0 - 60_000]).await[0];

    let now = b.now();
    b.clock.set(T0 - 100_000); // claimed on time, long ago
    let expired_c = claim_all(&b, &[expired], "node-a:1", 30_000).await; // lease ended at T0 - 70 s
    b.clock.set(now);
    claim_all(&b, &[live], "node-a:2", 60_000).await; // lease ends at T0 + 40 s
    let done_c = claim_all(&b, &[done], "node-a:3", 1_000).await;
    assert_eq!(b.fires.record(&[succeeded(&done_c[0], 5)], b.now()).await.unwrap(), 1);
    let missed_id = fire(&b, missed).await.task_id;
    assert_eq!(b.fires.mark_missed(&[missed_id], "missed", b.now()).await.unwrap(), 1);

    let grace = 3_000;
    let got = b.fires.overdue(T0 - grace, T0, 0, 100).await.unwrap();
    let expected = vec![
        Overdue { task_id: fire(&b, late).await.task_id, key: late, status: FireStatus::Pending, backfill: false },
        Overdue { task_id: fire(&b, other).await.task_id, key: other, status: FireStatus::Pending, backfill: false },
        Overdue { task_id: expired_c[0].task_id, key: expired, status: FireStatus::Running, backfill: false },
    ];
    assert_eq!(got, expected, "newest first; not within grace, live, final or future");
    assert_eq!(b.fires.overdue(T0 - grace, T0, 0, 2).await.unwrap(), expected[..2], "limit keeps the newest");
}

pub async fn reclaim_takes_over_an_expired_lease_and_fences_the_old_owner(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let k = insert(&b, &t, &[T0]).await[0];
    let old = claim_all(&b, &[k], "node-a:1", 10_000).await.remove(0);
    b.clock.advance(40);
    let failed_once = result(&old, FireStatus::Running, 1, "HTTP 500", 40, Some(T0 + 10_000));
    assert_eq!(b.fires.record(&[failed_once], b.now()).await.unwrap(), 1);

    b.clock.set(T0 + 5_000);
    let early = b.fires.reclaim(&[old.task_id], "node-b:1", 30_000, b.now(), 0).await.unwrap();
    assert!(early.claimed.is_empty(), "the lease is live: {early:?}");

    b.clock.set(T0 + 10_001);
    let now = b.now();
    let taken = b.fires.reclaim(&[old.task_id], "node-b:1", 30_000, now, 0).await.unwrap();
    assert_eq!(taken.skipped, 0);
    assert_eq!(
        taken.claimed,
        vec![ClaimedFire {
            task_id: old.task_id,
            key: k,
            scheduled_ms: k.run_ms,
            attempt: 1,
            owner: "node-b:1".into(),
            manual: false,
            replay: false,
            timer_modified: t.modify_time
        }],
        "attempt counts what was made before this claim"
    );
    let new = &taken.claimed[0];
    // The reclaimed lease runs from now, not from the run time.
    assert!(b.fires.overdue(T0 - 1, now + 29_999, 0, 100).await.unwrap().is_empty());
    assert_eq!(b.fires.overdue(T0 - 1, now + 30_001, 0, 100).await.unwrap().len(), 1);
    let again = b.fires.reclaim(&[old.task_id], "node-c:1", 30_000, now + 1, 0).await.unwrap();
    assert!(again.claimed.is_empty(), "one owner at a time");

    // The old owner wakes up: its result and its release are refused.
    assert_eq!(b.fires.record(&[succeeded(&old, 1)], now).await.unwrap(), 0);
    assert_eq!(b.fires.release(std::slice::from_ref(&old), now).await.unwrap(), 0);
    let f = fire(&b, k).await;
    assert_eq!((f.status, f.attempt, f.output.as_str()), (FireStatus::Running, 1, "HTTP 500"));

    b.clock.advance(25);
    let second = result(new, FireStatus::Succeeded, 2, "HTTP 200: second", 10_026, None);
    assert_eq!(b.fires.record(&[second], b.now()).await.unwrap(), 1);
    let f = fire(&b, k).await;
    assert_eq!((f.status, f.attempt, f.output.as_str()), (FireStatus::Succeeded, 2, "HTTP 200: second"));
    assert_eq!(f.cost_time, 40, "the first attempt's lateness is kept across owners");
    let final_ = b.fires.reclaim(&[old.task_id], "node-c:1", 30_000, b.now() + 1_000_000, 0).await.unwrap();
    assert_eq!((final_.claimed.len(), final_.skipped), (0, 0), "final fires are never reclaimed");

    // Overdue pending fires are reclaimed too, leased from now.
    let pending = insert(&b, &t, &[T0 - 5_000]).await[0];
    let id = fire(&b, pending).await.task_id;
    let got = b.fires.reclaim(&[id], "node-c:2", 30_000, b.now(), 0).await.unwrap();
    let expected = ClaimedFire {
        task_id: id,
        key: pending,
        scheduled_ms: pending.run_ms,
        attempt: 0,
        owner: "node-c:2".into(),
        manual: false,
        replay: false,
        timer_modified: t.modify_time,
    };
    assert_eq!(got.claimed, vec![expected]);
    assert!(b.fires.overdue(b.now(), b.now() + 29_999, 0, 100).await.unwrap().is_empty());
}

pub async fn reclaim_skips_fires_of_a_timer_no_longer_enabled(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0 - 90_000, T0 - 10_000]).await;
    let now = b.now();
    b.clock.set(T0 - 90_000); // claimed on time, long ago
    let old = claim_all(&b, &keys[..1], "node-a:1", 30_000).await.remove(0);
    b.clock.set(now);
    let pending_id = fire(&b, keys[1]).await.task_id;
    assert!(b.timers.set_timer_status(t.id, TimerStatus::Disabled, b.now()).await.unwrap());

    let outcome = b.fires.reclaim(&[old.task_id, pending_id], "node-b:1", 30_000, b.now(), 0).await.unwrap();
    assert_eq!((outcome.claimed.len(), outcome.skipped), (0, 2));
    for k in &keys {
        let f = fire(&b, *k).await;
        assert_eq!(f.status, FireStatus::Skipped, "{k}");
        assert!(!f.output.is_empty());
    }
    assert_eq!(b.fires.record(&[succeeded(&old, 1)], b.now()).await.unwrap(), 0, "skipped is final");
    assert!(b.fires.overdue(b.now(), b.now(), 0, 100).await.unwrap().is_empty());
}

pub async fn mark_missed_touches_only_pending_fires(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0 - 30_000, T0 - 20_000, T0 - 10_000]).await;
    let running = claim_all(&b, &keys[1..3], "node-a:1", 60_000).await;
    let finished = running.iter().find(|c| c.key == keys[2]).unwrap();
    assert_eq!(b.fires.record(&[succeeded(finished, 3)], b.now()).await.unwrap(), 1);
    let mut ids = Vec::new();
    for k in &keys {
        ids.push(fire(&b, *k).await.task_id);
    }

    b.clock.advance(1_000);
    let why = "missed: its time passed";
    assert_eq!(b.fires.mark_missed(&ids, why, b.now()).await.unwrap(), 1);
    let f = fire(&b, keys[0]).await;
    assert_eq!((f.status, f.output.as_str(), f.modify_time), (FireStatus::Missed, why, b.now()));
    assert_eq!(fire(&b, keys[1]).await.status, FireStatus::Running);
    assert_eq!(fire(&b, keys[2]).await.status, FireStatus::Succeeded);
    assert_eq!(b.fires.mark_missed(&ids[..1], "again", b.now()).await.unwrap(), 0);
    assert_eq!(fire(&b, keys[0]).await.output, why);
    let claim = b.fires.claim(&keys[..1], "node-a:2", 60_000, b.now()).await.unwrap();
    assert!(claim.claimed.is_empty(), "missed is final");
}

pub async fn list_fires_is_newest_first_with_filter_and_total(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let u = timer(&b, "u", TimerStatus::Enabled).await;
    insert(&b, &t, &[T0 + 3_000, T0 + 1_000, T0 + 5_000, T0 + 2_000, T0 + 4_000]).await;
    insert(&b, &u, &[T0 + 3_000]).await;
    let claims = claim_all(&b, &[key(&t, T0 + 1_000), key(&t, T0 + 4_000)], "node-a:1", 60_000).await;
    let results: Vec<_> = claims.iter().map(|c| succeeded(c, 2)).collect();
    assert_eq!(b.fires.record(&results, b.now()).await.unwrap(), 2);

    let page = |status, offset, limit| {
        let fires = b.fires.clone();
        let id = t.id;
        async move {
            let (list, total) = fires.list_fires(id, status, offset, limit).await.unwrap();
            assert!(list.iter().all(|f| f.timer_id == id && f.app == APP), "{list:?}");
            (list.iter().map(|f| f.run_ms - T0).collect::<Vec<_>>(), total)
        }
    };
    assert_eq!(page(None, 0, 2).await, (vec![5_000, 4_000], 5));
    assert_eq!(page(None, 2, 2).await, (vec![3_000, 2_000], 5));
    assert_eq!(page(None, 4, 2).await, (vec![1_000], 5));
    assert_eq!(page(None, 5, 2).await, (vec![], 5));
    assert_eq!(page(Some(FireStatus::Succeeded), 0, 10).await, (vec![4_000, 1_000], 2));
    assert_eq!(page(Some(FireStatus::Pending), 0, 2).await, (vec![5_000, 3_000], 3));
    assert_eq!(page(Some(FireStatus::Missed), 0, 10).await, (vec![], 0));
    let (list, total) = b.fires.list_fires(u.id, None, 0, 10).await.unwrap();
    assert_eq!((list.len(), total, list[0].run_ms), (1, 1, T0 + 3_000));
}

pub async fn claim_of_a_repeated_key_claims_it_once(b: Backend) {
    // Batches from the trigger are concatenated; a key may appear twice.
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0 + 1_000, T0 + 2_000]).await;
    let outcome = b.fires.claim(&[keys[0], keys[1], keys[0]], "node-a:1", 60_000, b.now()).await.unwrap();
    let mut won: Vec<FireKey> = outcome.claimed.iter().map(|c| c.key).collect();
    won.sort();
    assert_eq!(won, keys, "each fire is claimed (and so fired) once");

    let off = timer(&b, "off", TimerStatus::Disabled).await;
    let k = insert(&b, &off, &[T0 + 1_000]).await[0];
    let outcome = b.fires.claim(&[k, k], "node-a:2", 60_000, b.now()).await.unwrap();
    assert_eq!((outcome.claimed.len(), outcome.skipped), (0, 1), "skipped counts fires, not keys");
}

pub async fn delete_ended_before_takes_only_old_ended_fires(b: Backend) {
    let t = timer(&b, "old", TimerStatus::Enabled).await;
    let now = b.now();
    let keys = insert(&b, &t, &[now - 5_000, now - 4_000, now - 3_000, now - 2_000, now + 1_000]).await;
    let mut claims = claim_all(&b, &keys[..3], "node-a:1", 60_000).await;
    claims.sort_by_key(|c| c.key.run_ms);
    // Two ended (succeeded, failed), one still running, one pending, one in the future.
    let ended = [succeeded(&claims[0], 1), result(&claims[1], FireStatus::Failed, 1, "HTTP 500", 1, None)];
    assert_eq!(b.fires.record(&ended, now).await.unwrap(), 2);
    assert_eq!(b.fires.mark_missed(&[fire(&b, keys[3]).await.task_id], "missed", now).await.unwrap(), 1);

    assert_eq!(b.fires.delete_ended_before(now - 4_500, 10).await.unwrap(), 1, "only what ran before the cut");
    assert_eq!(b.fires.delete_ended_before(now, 1).await.unwrap(), 1, "at most the limit");
    assert_eq!(b.fires.delete_ended_before(now, 10).await.unwrap(), 1, "then the rest");
    assert_eq!(b.fires.delete_ended_before(now + 10_000, 10).await.unwrap(), 0, "running and pending stay");
    let (left, total) = b.fires.list_fires(t.id, None, 0, 10).await.unwrap();
    let mut runs: Vec<i64> = left.iter().map(|f| f.run_ms).collect();
    runs.sort();
    assert_eq!((runs, total), (vec![now - 3_000, now + 1_000], 2));
}

pub async fn listing_windows_split_due_from_upcoming(b: Backend) {
    let t = timer(&b, "w", TimerStatus::Enabled).await;
    let now = b.now();
    let keys = insert(&b, &t, &[now - 2_000, now - 1_000, now, now + 1_000, now + 2_000]).await;
    let claims = claim_all(&b, &keys[..1], "node-a:1", 60_000).await;
    assert_eq!(b.fires.record(&[succeeded(&claims[0], 2)], now).await.unwrap(), 1);
    let runs =
        |(list, total): (Vec<xtimer_core::fire::Fire>, u64)| (list.iter().map(|f| f.run_ms).collect::<Vec<_>>(), total);

    let due = b.fires.list_fires_in(t.id, None, FireWindow::DueBy(now), 0, 10).await.unwrap();
    assert_eq!(runs(due), (vec![now, now - 1_000, now - 2_000], 3), "due by now, newest first");
    let due = b.fires.list_fires_in(t.id, None, FireWindow::DueBy(now), 1, 1).await.unwrap();
    assert_eq!(runs(due), (vec![now - 1_000], 3), "paged");
    let done = b.fires.list_fires_in(t.id, Some(FireStatus::Succeeded), FireWindow::DueBy(now), 0, 10).await.unwrap();
    assert_eq!(runs(done), (vec![now - 2_000], 1));
    let upcoming = b.fires.list_fires_in(t.id, None, FireWindow::UpcomingAfter(now), 0, 10).await.unwrap();
    assert_eq!(runs(upcoming), (vec![now + 1_000, now + 2_000], 2), "planned, soonest first");
    let all = b.fires.list_fires_in(t.id, None, FireWindow::All, 0, 10).await.unwrap();
    assert_eq!(all.1, 5);
}

pub async fn manual_fires_are_marked_and_outlive_a_reschedule(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let scheduled = insert(&b, &t, &[T0 - 1_000, T0 + 1_000, T0 + 2_000]).await;
    let manual = NewFire { key: FireKey { timer_id: t.id, run_ms: T0 + 1_500 }, app: t.app.clone() };
    assert!(b.fires.insert_manual_fire(&manual, b.now()).await.unwrap());
    assert!(!b.fires.insert_manual_fire(&manual, b.now()).await.unwrap(), "its key is taken now");
    let taken = NewFire { key: scheduled[1], app: t.app.clone() };
    assert!(!b.fires.insert_manual_fire(&taken, b.now()).await.unwrap(), "a scheduled fire's key is never reused");
    assert!(fire(&b, manual.key).await.manual);
    assert!(!fire(&b, scheduled[1]).await.manual);

    let claimed = claim_all(&b, &[manual.key, scheduled[2]], "node-a:1", 10_000).await;
    let manual_claim = claimed.iter().find(|c| c.key == manual.key).unwrap();
    assert!(manual_claim.manual);
    assert_eq!(manual_claim.idempotency_key(), format!("{}_manual", manual.key));
    assert_eq!(manual_claim.timer_modified, t.modify_time);
    let other = claimed.iter().find(|c| c.key == scheduled[2]).unwrap();
    assert_eq!((other.manual, other.idempotency_key()), (false, scheduled[2].to_string()));

    // Pending scheduled fires from T0 on go; the past one, the running one
    // and the manual one stay.
    b.fires.release(&claimed[..], b.now()).await.unwrap();
    assert_eq!(b.fires.delete_pending_from(t.id, T0).await.unwrap(), 2);
    let left = b.fires.pending_between(Some(t.id), 0, i64::MAX, 100).await.unwrap();
    assert_eq!(left, vec![scheduled[0], manual.key]);
}

pub async fn backfilled_fires_wait_for_their_send_time_and_say_so(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    insert(&b, &t, &[T0 - 50_000]).await;
    let backfill = |run_ms: i64, send_at_ms: i64| BackfillFire {
        fire: NewFire { key: FireKey { timer_id: t.id, run_ms }, app: t.app.clone() },
        send_at_ms,
    };
    let first = backfill(T0 - 40_000, T0);
    let second = backfill(T0 - 30_000, T0 + 100);
    let taken = backfill(T0 - 50_000, T0);
    assert_eq!(b.fires.insert_backfill(&[first.clone(), second.clone(), taken], b.now()).await.unwrap(), 2);
    assert_eq!(
        b.fires.run_times_between(t.id, T0 - 50_000, T0 - 30_000).await.unwrap(),
        vec![T0 - 50_000, T0 - 40_000],
        "every record in the half-open window, ascending"
    );
    assert!(!fire(&b, first.fire.key).await.manual, "a backfilled fire is a scheduled time, not a manual one");

    let overdue = |now: i64| {
        let fires = b.fires.clone();
        async move {
            let got = fires.overdue(now - 3_000, now, 0, 100).await.unwrap();
            got.into_iter().map(|o| (o.key.run_ms, o.backfill)).collect::<Vec<_>>()
        }
    };
    assert_eq!(overdue(T0 - 1).await, vec![(T0 - 50_000, false)], "neither is due to be sent yet");
    assert_eq!(overdue(T0).await, vec![(T0 - 40_000, true), (T0 - 50_000, false)]);
    assert_eq!(overdue(T0 + 100).await, vec![(T0 - 30_000, true), (T0 - 40_000, true), (T0 - 50_000, false)]);
}

/// `explainFire`'s read: a timer's fire by its scheduled time, with the
/// token of the claim that took it last (which names its node) and its
/// lease; none for another time or another timer.
pub async fn fire_at_reads_a_fire_by_its_scheduled_time_with_its_owner(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let u = timer(&b, "u", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0, T0 + 1_000]).await;
    insert(&b, &u, &[T0]).await;
    let planned = b.fires.fire_at(t.id, T0 + 1_000).await.unwrap().expect("the planned fire");
    assert_eq!((planned.fire.run_ms, planned.fire.status), (T0 + 1_000, FireStatus::Pending));
    assert_eq!((planned.owner, planned.lease_until), (None, None), "never claimed");
    assert!(b.fires.fire_at(t.id, T0 + 500).await.unwrap().is_none(), "no fire at that time");
    assert!(b.fires.fire_at(t.id + u.id + 1, T0).await.unwrap().is_none(), "no such timer");

    let c = &claim_all(&b, &keys[..1], "node-a:7", 60_000).await[0];
    let running = b.fires.fire_at(t.id, T0).await.unwrap().unwrap();
    assert_eq!(running.fire.task_id, c.task_id);
    assert_eq!((running.fire.status, running.owner.as_deref()), (FireStatus::Running, Some("node-a:7")));
    assert_eq!(running.lease_until, Some(T0 + 60_000), "the lease runs from the run time");
    b.clock.advance(150);
    let done = result(c, FireStatus::Succeeded, 1, "HTTP 200: ok", 150, None);
    assert_eq!(b.fires.record(&[done], b.now()).await.unwrap(), 1);
    let ended = b.fires.fire_at(t.id, T0).await.unwrap().unwrap();
    assert_eq!((ended.fire.status, ended.fire.attempt, ended.fire.cost_time), (FireStatus::Succeeded, 1, 150));
    assert_eq!(ended.owner.as_deref(), Some("node-a:7"), "an ended fire keeps its owner token");
    assert_eq!(ended.fire.output, "HTTP 200: ok");
}

/// The per-timer figures' read: one timer's fires in a run-time range,
/// newest first, with status and lateness, at most `limit`.
pub async fn outcomes_between_reads_one_timers_range_newest_first(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let u = timer(&b, "u", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0, T0 + 1_000, T0 + 2_000, T0 + 3_000]).await;
    insert(&b, &u, &[T0 + 1_000]).await;
    let claims = claim_all(&b, &keys[..2], "node-a:1", 60_000).await;
    let by_run = |run: i64| claims.iter().find(|c| c.key.run_ms == run).unwrap();
    let results = [succeeded(by_run(T0), 40), result(by_run(T0 + 1_000), FireStatus::Failed, 1, "HTTP 500", 900, None)];
    assert_eq!(b.fires.record(&results, b.now()).await.unwrap(), 2);
    b.fires.mark_missed(&[fire(&b, keys[2]).await.task_id], "missed: late", b.now()).await.unwrap();

    let all = b.fires.outcomes_between(t.id, T0, T0 + 3_000, 100).await.unwrap();
    let seen: Vec<(FireStatus, i64)> = all.iter().map(|o| (o.status, o.cost_time)).collect();
    assert_eq!(
        seen,
        [(FireStatus::Pending, 0), (FireStatus::Missed, 0), (FireStatus::Failed, 900), (FireStatus::Succeeded, 40)],
        "newest first, this timer's only, both ends in"
    );
    let newest = b.fires.outcomes_between(t.id, T0, T0 + 3_000, 2).await.unwrap();
    assert_eq!(newest.iter().map(|o| o.status).collect::<Vec<_>>(), [FireStatus::Pending, FireStatus::Missed]);
    let middle = b.fires.outcomes_between(t.id, T0 + 1, T0 + 1_000, 100).await.unwrap();
    assert_eq!(middle.iter().map(|o| o.status).collect::<Vec<_>>(), [FireStatus::Failed]);
}
