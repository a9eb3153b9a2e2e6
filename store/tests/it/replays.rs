//! `FireRepo` conformance for the day something breaks: a replayed fire is
//! claimed whatever its timer's status (not once deleted), paced fires are
//! left to the reconciler and found a pass ahead, a fire's earlier attempts
//! and takeovers are kept, and the changes the store makes on its own are
//! in the timer's history.

use xtimer_core::fire::FireStatus;
use xtimer_core::node::NodeInfo;
use xtimer_core::timer::TimerStatus;
use xtimer_store::{Change, Quota};

use crate::helpers::{claim_all, fire, insert, key, result, succeeded, timer, Backend, T0};

/// Fails `keys`' fires once (one attempt each); returns their task ids.
async fn failed_once(b: &Backend, keys: &[xtimer_core::fire::FireKey]) -> Vec<i64> {
    let claims = claim_all(b, keys, "node-a:1", 60_000).await;
    let failed: Vec<_> = claims.iter().map(|c| result(c, FireStatus::Failed, 1, "HTTP 500: down", 3, None)).collect();
    assert_eq!(b.fires.record(&failed, b.now()).await.unwrap(), keys.len() as u64);
    claims.iter().map(|c| c.task_id).collect()
}

pub async fn a_replayed_fire_is_claimed_whatever_its_timers_status_but_deleted(b: Backend) {
    let disabled = timer(&b, "disabled", TimerStatus::Enabled).await;
    let completed = timer(&b, "completed", TimerStatus::Enabled).await;
    let deleted = timer(&b, "deleted", TimerStatus::Enabled).await;
    let run = T0 + 1_000;
    let keys = [key(&disabled, run), key(&completed, run), key(&deleted, run)];
    for t in [&disabled, &completed, &deleted] {
        insert(&b, t, &[run]).await;
    }
    b.clock.advance(2_000);
    let ids = failed_once(&b, &keys).await;
    b.timers.set_timer_status(disabled.id, TimerStatus::Disabled, b.now()).await.unwrap();
    b.timers.set_timer_status(completed.id, TimerStatus::Completed, b.now()).await.unwrap();
    b.timers.set_timer_status(deleted.id, TimerStatus::Deleted, b.now()).await.unwrap();

    let paced: Vec<(i64, i64)> = ids.iter().map(|id| (*id, b.now())).collect();
    assert_eq!(b.fires.replay(&paced, &[FireStatus::Failed], b.now()).await.unwrap(), 3);
    // A paced fire is the reconciler's: the trigger's claim leaves it alone.
    let by_trigger = b.fires.claim(&keys, "node-a:2", 60_000, b.now()).await.unwrap();
    assert_eq!((by_trigger.claimed.len(), by_trigger.skipped), (0, 0), "left to the reconciler");
    let taken = b.fires.reclaim(&ids, "node-a:3", 60_000, b.now(), i64::MIN).await.unwrap();
    let mut claimed: Vec<i64> = taken.claimed.iter().map(|c| c.key.timer_id).collect();
    claimed.sort_unstable();
    assert_eq!(claimed, vec![disabled.id, completed.id], "sent though disabled or completed");
    assert!(taken.claimed.iter().all(|c| c.replay && c.attempt == 1), "{:?}", taken.claimed);
    assert_eq!(taken.skipped, 1, "a deleted timer's replay is skipped");
    assert_eq!(fire(&b, keys[2]).await.status, FireStatus::Skipped);
}

pub async fn paced_fires_are_found_a_pass_ahead(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let runs = [T0 + 1_000, T0 + 2_000, T0 + 3_000];
    let keys = insert(&b, &t, &runs).await;
    b.clock.advance(4_000);
    let ids = failed_once(&b, &keys).await;
    let now = b.now();
    let paced: Vec<(i64, i64)> = ids.iter().enumerate().map(|(i, id)| (*id, now + 500 * i as i64)).collect();
    b.fires.replay(&paced, &[FireStatus::Failed], now).await.unwrap();
    // Run within the grace: the overdue scan leaves them; the look ahead
    // finds those due by the next pass, soonest first, with their times.
    let pending_before = now - 10_000;
    let soon = b.fires.paced_soon(pending_before, now - 1, now + 1_000, 100).await.unwrap();
    assert_eq!(soon, vec![paced[0], paced[1], paced[2]]);
    // Until claimed, one whose time has come stays found; once claimed, not.
    let later = b.fires.paced_soon(pending_before, now + 600, now + 1_600, 100).await.unwrap();
    assert_eq!(later, vec![paced[0], paced[1], paced[2]], "due and not yet claimed");
    b.fires.reclaim(&ids[..2], "node-a:2", 60_000, now, i64::MIN).await.unwrap();
    let later = b.fires.paced_soon(pending_before, now + 600, now + 1_600, 100).await.unwrap();
    assert_eq!(later, vec![paced[2]], "the claimed two are gone");
    // Run before the grace: due now, the overdue scan's; later, the look ahead's.
    let soon = b.fires.paced_soon(now, now, now + 1_000, 100).await.unwrap();
    assert_eq!(soon, vec![paced[2]]);
}

pub async fn earlier_attempts_and_takeovers_are_kept(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let run = T0 + 1_000;
    let keys = insert(&b, &t, &[run]).await;
    b.clock.advance(1_000);
    let claim = claim_all(&b, &keys, "node-a:1", 60_000).await.remove(0);
    // Attempt 1 fails, a retry is due: the row holds it, nothing is kept yet.
    let retry = result(&claim, FireStatus::Running, 1, "HTTP 500: down", 2, Some(b.now() + 1_000));
    b.fires.record(&[retry], b.now()).await.unwrap();
    assert!(b.fires.fire_log(claim.task_id).await.unwrap().attempts.is_empty(), "the common path writes nothing");

    // node-a dies; node-b takes the fire over and its attempt 2 succeeds.
    b.clock.advance(70_000);
    let node_b = NodeInfo {
        id: "node-b".into(),
        host: "h".into(),
        listen: "127.0.0.1:1".into(),
        started_at: b.now(),
        heartbeat_at: b.now(),
        shards: Vec::new(),
    };
    b.nodes.heartbeat(&node_b).await.unwrap();
    let taken = b.fires.reclaim(&[claim.task_id], "node-b:9", 60_000, b.now(), b.now() - 3_000).await.unwrap();
    assert_eq!(taken.claimed.len(), 1, "taken over");
    let second = taken.claimed[0].clone();
    b.clock.advance(10);
    b.fires.record(&[succeeded(&second, 70_000)], b.now()).await.unwrap();

    let log = b.fires.fire_log(claim.task_id).await.unwrap();
    assert_eq!(log.attempts.len(), 1, "{log:?}");
    let first = &log.attempts[0];
    assert_eq!((first.attempt, first.owner.as_deref()), (1, Some("node-a:1")), "kept with the node that made it");
    assert_eq!(
        (first.status, first.output.as_str(), first.sent_at),
        (FireStatus::Running, "HTTP 500: down", Some(run + 2))
    );
    assert_eq!(log.claims.len(), 1, "{log:?}");
    assert_eq!(
        (log.claims[0].owner.as_str(), log.claims[0].taken_over_from.as_deref()),
        ("node-b:9", Some("node-a:1"))
    );
    let detail = b.fires.fire_at(t.id, run).await.unwrap().unwrap();
    assert_eq!((detail.fire.attempt, detail.sent_at), (2, Some(run + 70_000)), "the row holds the last attempt");

    // A replay keeps the row's attempt before it takes its place.
    b.fires.replay(&[(claim.task_id, b.now())], &[FireStatus::Succeeded], b.now()).await.unwrap();
    let log = b.fires.fire_log(claim.task_id).await.unwrap();
    let kept: Vec<(u32, Option<&str>)> = log.attempts.iter().map(|a| (a.attempt, a.owner.as_deref())).collect();
    assert_eq!(kept, vec![(1, Some("node-a:1")), (2, Some("node-b:9"))]);
}

pub async fn the_stores_own_status_changes_are_in_the_history(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[b.now() + 1_000]).await;
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    let failed = result(&claims[0], FireStatus::Failed, 1, "HTTP 500", 0, None);
    b.fires.record(&[failed], b.now()).await.unwrap();
    assert!(b.timers.pause_if_failing(t.id, claims[0].task_id, 1, 0, "why", b.now()).await.unwrap());
    let history = b.timers.timer_history(t.id, 10).await.unwrap();
    assert_eq!(history.len(), 1, "{history:?}");
    let entry = &history[0];
    assert_eq!((entry.action.as_str(), entry.by.as_str()), ("disable", "system"));
    let changes: serde_json::Value = serde_json::from_str(&entry.changes).unwrap();
    assert_eq!(changes, serde_json::json!({"status": [2, 1], "pauseReason": [null, "why"]}));
}

pub async fn every_status_change_is_noted_by_whoever_made_it_in_its_transaction(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let by_app = Change { action: "disable", by: "app:it" };
    assert!(b.timers.set_status_within(t.id, TimerStatus::Disabled, b.now(), &Quota::default(), by_app).await.unwrap());
    assert!(b.timers.set_status_within(t.id, TimerStatus::Disabled, b.now(), &Quota::default(), by_app).await.unwrap());
    let mut new = t.def.clone();
    new.name = "renamed".into();
    new.status = TimerStatus::Disabled;
    let changes = serde_json::json!({"name": ["t", "renamed"]});
    let admin = Change { action: "update", by: "admin" };
    assert!(b.timers.update_timer(t.id, &new, b.now(), &Quota::default(), admin, &changes).await.unwrap());
    let unchanged = serde_json::json!({});
    assert!(b.timers.update_timer(t.id, &new, b.now(), &Quota::default(), admin, &unchanged).await.unwrap());
    assert!(b.timers.set_timer_status(t.id, TimerStatus::Enabled, b.now()).await.unwrap());
    assert!(b.timers.pause_with_reason(t.id, "quota", b.now()).await.unwrap());
    assert!(!b.timers.pause_with_reason(t.id, "again", b.now()).await.unwrap(), "already paused");
    // A change refused (a full quota) notes nothing.
    let full = Quota { timers_per_app: 0, fires_per_minute_per_app: 0 };
    let refused = Change { action: "enable", by: "app:it" };
    assert!(b.timers.set_status_within(t.id, TimerStatus::Enabled, b.now(), &full, refused).await.is_err());

    let history = b.timers.timer_history(t.id, 10).await.unwrap();
    let noted: Vec<(&str, &str, serde_json::Value)> = history
        .iter()
        .rev()
        .map(|e| (e.action.as_str(), e.by.as_str(), serde_json::from_str(&e.changes).unwrap()))
        .collect();
    assert_eq!(
        noted,
        vec![
            ("disable", "app:it", serde_json::json!({"status": [2, 1]})),
            ("update", "admin", changes),
            ("enable", "system", serde_json::json!({"status": [1, 2]})),
            ("pause", "receiver", serde_json::json!({"status": [2, 1], "pauseReason": [null, "quota"]})),
        ],
        "one entry per change, none for a change that changed nothing or was refused"
    );
}
