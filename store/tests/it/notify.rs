//! `NotifyRepo` conformance: notifications owed with a fire's result,
//! taken under a lease, rescheduled and settled by their holder only.

use std::collections::HashSet;

use xtimer_core::fire::{ClaimedFire, FireStatus};
use xtimer_core::timer::{HttpNotify, LateAlert, TimerStatus};
use xtimer_store::{OwedKind, OwedNotification};

use crate::helpers::{claim_all, fire, insert, new_timer, result, succeeded, timer, Backend, APP, T0};

/// A sender's lease in these tests, ms.
const LEASE_MS: i64 = 15_000;

/// The `onFailure` notification `claim`'s failed attempt number `attempt` owes.
fn owed(claim: &ClaimedFire, attempt: u32, output: &str) -> OwedNotification {
    OwedNotification {
        task_id: claim.task_id,
        kind: OwedKind::Failure,
        key: claim.key,
        manual: claim.manual,
        attempt,
        output: output.into(),
        sends: 0,
        owner: claim.owner.clone(),
    }
}

/// `n` as held by `owner` after `sends` sends.
fn held(n: &OwedNotification, owner: &str, sends: u32) -> OwedNotification {
    OwedNotification { owner: owner.into(), sends, ..n.clone() }
}

pub async fn a_notice_is_owed_only_with_a_failed_result_written_under_its_owner(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0, T0 + 1_000, T0 + 2_000]).await;
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    let failed = result(&claims[0], FireStatus::Failed, 2, "HTTP 500: no", 7, None);
    let ok = succeeded(&claims[1], 3);
    let stale = ClaimedFire { owner: "node-x:9".into(), ..claims[2].clone() };
    let fenced = result(&stale, FireStatus::Failed, 1, "HTTP 500: stale", 1, None);
    let notices =
        [owed(&claims[0], 2, "HTTP 500: no"), owed(&claims[1], 1, "HTTP 200: ok"), owed(&stale, 1, "HTTP 500: stale")];

    let lease = b.now() + LEASE_MS;
    let recorded =
        b.notifications.record_owing(&[failed, ok, fenced], &notices, lease, b.now()).await.expect("record owing");
    assert_eq!(recorded.written, 2, "the stale owner's result is fenced out");
    assert_eq!(recorded.owed, [notices[0].clone()], "owed only with a failed result written under its owner");
    assert_eq!(fire(&b, keys[0]).await.status, FireStatus::Failed);
    assert_eq!(fire(&b, keys[1]).await.status, FireStatus::Succeeded);
    assert_eq!(fire(&b, keys[2]).await.status, FireStatus::Running);

    // Held by the recorder's owner until the lease ends; then anyone's.
    assert_eq!(b.notifications.take_owed("node-b:1", b.now() + LEASE_MS, b.now(), 10).await.unwrap(), []);
    b.clock.advance(LEASE_MS);
    let taken = b.notifications.take_owed("node-b:1", b.now() + LEASE_MS, b.now(), 10).await.unwrap();
    assert_eq!(taken, [held(&notices[0], "node-b:1", 0)], "taken whole: the message needs nothing else");

    // Results without notices are plain records.
    let more = insert(&b, &t, &[T0 + 3_000]).await;
    let claim = claim_all(&b, &more, "node-a:2", 60_000).await;
    let plain = result(&claim[0], FireStatus::Failed, 1, "HTTP 500: x", 0, None);
    let recorded = b.notifications.record_owing(&[plain], &[], lease, b.now()).await.unwrap();
    assert_eq!((recorded.written, recorded.owed.len()), (1, 0));
}

pub async fn a_notice_is_taken_once_its_lease_lapsed_and_held_by_its_taker(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0]).await;
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    let notice = owed(&claims[0], 1, "HTTP 503: busy");
    let failed = result(&claims[0], FireStatus::Failed, 1, "HTTP 503: busy", 0, None);
    let n = b.notifications.clone();
    n.record_owing(&[failed], std::slice::from_ref(&notice), b.now() + LEASE_MS, b.now()).await.unwrap();

    // The writer sends, fails and keeps it for its retry.
    assert!(n.reschedule_owed(&notice, 1, b.now() + 1_000 + LEASE_MS).await.unwrap());
    b.clock.advance(LEASE_MS);
    assert_eq!(n.take_owed("node-b:1", b.now() + LEASE_MS, b.now(), 10).await.unwrap(), [], "still kept");
    // The writer died: once its lease lapsed, one taker gets it, sends tried included.
    b.clock.advance(1_000);
    let taken = n.take_owed("node-b:1", b.now() + LEASE_MS, b.now(), 10).await.unwrap();
    assert_eq!(taken, [held(&notice, "node-b:1", 1)]);
    assert_eq!(n.take_owed("node-c:1", b.now() + LEASE_MS, b.now(), 10).await.unwrap(), [], "one taker");

    // Its former holder can neither keep nor clear it.
    assert!(!n.reschedule_owed(&notice, 2, b.now() + LEASE_MS).await.unwrap());
    assert!(!n.settle_owed(&notice).await.unwrap());

    // Given back (send_at now): anyone's at once.
    assert!(n.reschedule_owed(&taken[0], 2, b.now()).await.unwrap());
    let again = n.take_owed("node-c:1", b.now() + LEASE_MS, b.now(), 10).await.unwrap();
    assert_eq!(again, [held(&notice, "node-c:1", 2)]);
    assert!(n.settle_owed(&again[0]).await.unwrap(), "settled by its holder");
    b.clock.advance(10 * LEASE_MS);
    assert_eq!(n.take_owed("node-d:1", b.now() + LEASE_MS, b.now(), 10).await.unwrap(), [], "gone once settled");
}

pub async fn concurrent_takers_take_each_notice_once(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let runs: Vec<i64> = (0..40).map(|i| T0 + i * 1_000).collect();
    let keys = insert(&b, &t, &runs).await;
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    let results: Vec<_> = claims.iter().map(|c| result(c, FireStatus::Failed, 1, "HTTP 500", 0, None)).collect();
    let notices: Vec<_> = claims.iter().map(|c| owed(c, 1, "HTTP 500")).collect();
    let recorded = b.notifications.record_owing(&results, &notices, b.now(), b.now()).await.unwrap();
    assert_eq!(recorded.owed.len(), 40);

    let lease = b.now() + LEASE_MS;
    let takers = (0..4).map(|i| {
        let n = b.notifications.clone();
        let now = b.now();
        tokio::spawn(async move { n.take_owed(&format!("node-{i}:1"), lease, now, 15).await.unwrap() })
    });
    let mut seen = HashSet::new();
    for taker in takers.collect::<Vec<_>>() {
        for owed in taker.await.unwrap() {
            assert!(seen.insert(owed.task_id), "{} taken twice", owed.task_id);
        }
    }
    assert_eq!(seen.len(), 40, "every notice taken, by one taker each");
}

/// A callback's answer may hold a NUL character, which PostgreSQL's text
/// cannot: the result and its notice are written all the same (the
/// character replaced there), not refused at every try.
pub async fn a_result_and_notice_whose_output_holds_a_nul_are_written(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0, T0 + 1_000]).await;
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    let output = "HTTP 500: a\0b";
    let results = [result(&claims[0], FireStatus::Failed, 1, output, 0, None), succeeded(&claims[1], 0)];
    let notice = owed(&claims[0], 1, output);
    let recorded = b.notifications.record_owing(&results, &[notice], b.now(), b.now()).await.expect("written");
    assert_eq!((recorded.written, recorded.owed.len()), (2, 1));
    let stored = fire(&b, keys[0]).await.output;
    assert!(stored == output || stored == "HTTP 500: a\u{FFFD}b", "{stored:?}");
    let taken = b.notifications.take_owed("node-b:1", b.now() + LEASE_MS, b.now(), 10).await.unwrap();
    assert_eq!(taken[0].output, stored);
}

/// The notification of `kind` `claim`'s attempt number `attempt` owes.
fn owed_as(kind: OwedKind, claim: &ClaimedFire, attempt: u32, output: &str) -> OwedNotification {
    OwedNotification { kind, ..owed(claim, attempt, output) }
}

/// `onMissed` is owed with a missed or skipped result, `onLate` with any
/// result of the fire, and a failed fire may owe both its `onFailure` and
/// its `onLate` (one notification per fire and kind).
pub async fn missed_and_late_notices_are_owed_with_the_results_they_are_for(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let runs: Vec<i64> = (0..6).map(|i| T0 + i * 1_000).collect();
    let keys = insert(&b, &t, &runs).await;
    let c = claim_all(&b, &keys, "node-a:1", 60_000).await;
    let c: Vec<_> = keys.iter().map(|k| c.iter().find(|f| f.key == *k).unwrap().clone()).collect();
    let results = [
        result(&c[0], FireStatus::Missed, 0, "missed", 0, None),
        result(&c[1], FireStatus::Skipped, 0, "skipped", 0, None),
        succeeded(&c[2], 3_000),
        result(&c[3], FireStatus::Failed, 1, "HTTP 500", 2_000, None),
        result(&c[4], FireStatus::Running, 1, "HTTP 503", 2_000, Some(b.now() + 60_000)),
        succeeded(&c[5], 0),
    ];
    let notices = [
        owed_as(OwedKind::Missed, &c[0], 0, "missed"),
        owed_as(OwedKind::Missed, &c[1], 0, "skipped"),
        owed_as(OwedKind::Late, &c[2], 1, "late ok"),
        owed_as(OwedKind::Failure, &c[3], 1, "HTTP 500"),
        owed_as(OwedKind::Late, &c[3], 1, "late failed"),
        owed_as(OwedKind::Late, &c[4], 1, "late retrying"),
        // Not what these results are for: never stored.
        owed_as(OwedKind::Missed, &c[5], 1, "succeeded"),
        owed_as(OwedKind::Failure, &c[0], 0, "missed"),
    ];
    let lease = b.now() + LEASE_MS;
    let recorded = b.notifications.record_owing(&results, &notices, lease, b.now()).await.expect("record owing");
    assert_eq!(recorded.written, 6);
    assert_eq!(recorded.owed, notices[..6], "each kind owed with the results it is for");
    // Owed again (a retry of the same write): left as it is.
    let again = b.notifications.record_owing(&[], &notices[..1], lease, b.now()).await.unwrap();
    assert!(again.owed.is_empty());

    b.clock.advance(LEASE_MS);
    let mut taken = b.notifications.take_owed("node-b:1", b.now() + LEASE_MS, b.now(), 100).await.unwrap();
    taken.sort_by_key(|n| (n.task_id, n.kind.code()));
    let mut want: Vec<_> = notices[..6].iter().map(|n| held(n, "node-b:1", 0)).collect();
    want.sort_by_key(|n| (n.task_id, n.kind.code()));
    assert_eq!(taken, want, "taken whole, kind included");
    // Settled one kind at a time.
    let both: Vec<_> = taken.iter().filter(|n| n.task_id == c[3].task_id).cloned().collect();
    assert_eq!(both.len(), 2);
    assert!(b.notifications.settle_owed(&both[0]).await.unwrap());
    assert!(b.notifications.reschedule_owed(&both[1], 1, b.now()).await.unwrap(), "the other kind is still held");
    let left = b.notifications.take_owed("node-c:1", b.now() + LEASE_MS, b.now(), 100).await.unwrap();
    assert_eq!(left, [held(&both[1], "node-c:1", 1)]);
}

/// Marking fires missed owes the `onMissed` of each one marked whose timer
/// has one, in the same transaction, held by no one: anyone's at once.
/// A fire not marked (not pending) owes nothing.
pub async fn marking_fires_missed_owes_their_on_missed(b: Backend) {
    let hook = HttpNotify {
        url: "http://127.0.0.1:9/alert".into(),
        method: "POST".into(),
        headers: Default::default(),
        body: None,
        timeout_ms: None,
        template: false,
        flow_key: None,
    };
    let mut alerting = new_timer(APP, "alerting", TimerStatus::Enabled);
    alerting.on_missed = Some(hook.clone());
    alerting.on_late = Some(LateAlert { threshold_ms: 1_000, notify: hook });
    let t = b.timers.create_timer(&alerting, b.now()).await.unwrap();
    assert_eq!(b.timers.get_timer(t.id).await.unwrap().unwrap(), t, "its alerts read back");
    assert_eq!((t.on_missed.clone(), t.on_late.clone()), (alerting.on_missed, alerting.on_late));
    let quiet = timer(&b, "quiet", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[T0 - 30_000, T0 - 20_000, T0 - 10_000]).await;
    let quiet_keys = insert(&b, &quiet, &[T0 - 30_000]).await;
    claim_all(&b, &keys[2..], "node-a:1", 60_000).await;
    let mut ids = Vec::new();
    for k in keys.iter().chain(&quiet_keys) {
        ids.push(fire(&b, *k).await.task_id);
    }

    b.clock.advance(1_000);
    let why = "missed: its time passed";
    assert_eq!(b.fires.mark_missed(&ids, why, b.now()).await.unwrap(), 3);
    let mut taken = b.notifications.take_owed("node-b:1", b.now() + LEASE_MS, b.now(), 10).await.unwrap();
    taken.sort_by_key(|n| n.key.run_ms);
    let want: Vec<_> = keys[..2]
        .iter()
        .zip(&ids)
        .map(|(key, &task_id)| OwedNotification {
            task_id,
            kind: OwedKind::Missed,
            key: *key,
            manual: false,
            attempt: 0,
            output: why.into(),
            sends: 0,
            owner: "node-b:1".into(),
        })
        .collect();
    assert_eq!(taken, want, "the timer with an onMissed owes one per fire marked; the running one none");
    for n in &taken {
        assert!(b.notifications.settle_owed(n).await.unwrap());
    }
    // Marked again: nothing is marked, nothing owed again.
    assert_eq!(b.fires.mark_missed(&ids, why, b.now()).await.unwrap(), 0);
    b.clock.advance(10 * LEASE_MS);
    assert_eq!(b.notifications.take_owed("node-c:1", b.now() + LEASE_MS, b.now(), 10).await.unwrap(), []);
}
