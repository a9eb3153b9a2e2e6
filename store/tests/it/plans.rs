//! Conformance: the writes of an expansion plan are checked against the
//! definition the plan was made from (`insert_planned_fires`,
//! `set_planned_next_runs`). A plan read before an `updateTimer` commits
//! writes nothing once it has: the update deleted the old definition's
//! pending fires, and none may come back.

use xtimer_core::fire::FireKey;
use xtimer_core::timer::{Schedule, Timer, TimerStatus};
use xtimer_store::{NewFire, NextRun, PlannedFire, Quota};

use crate::helpers::{key, new_timer, timer, Backend, APP};

/// `timer`'s fires at `now + offset` for each offset, planned from
/// `timer` as given (its `modify_time` the version read).
fn plan(b: &Backend, timer: &Timer, offsets: &[i64]) -> Vec<PlannedFire> {
    offsets
        .iter()
        .map(|o| PlannedFire {
            scheduled_ms: None,
            fire: NewFire { key: key(timer, b.now() + o), app: timer.app.clone() },
            timer_modified: timer.modify_time,
        })
        .collect()
}

/// Replaces `timer`'s schedule with `cron` at the clock's time, as
/// `updateTimer` does (the update, then its pending fires from now on
/// deleted); the timer as stored now.
async fn update_to(b: &Backend, timer: &Timer, cron: &str) -> Timer {
    let mut new = new_timer(APP, &timer.name, TimerStatus::Enabled);
    new.schedule = Schedule::Cron { expr: cron.into(), timezone: "UTC".into() };
    assert!(b
        .timers
        .update_timer(timer.id, &new, b.now(), &Quota::default(), crate::helpers::ADMIN, &serde_json::json!({}))
        .await
        .unwrap());
    b.fires.delete_pending_from(timer.id, b.now()).await.unwrap();
    b.timers.get_timer(timer.id).await.unwrap().unwrap()
}

/// The run times of `timer`'s fires, ascending.
async fn run_times(b: &Backend, timer: &Timer) -> Vec<i64> {
    b.fires.run_times_between(timer.id, i64::MIN, i64::MAX).await.unwrap()
}

pub async fn a_plan_of_the_current_definition_inserts_its_fires_once(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let other = timer(&b, "other", TimerStatus::Enabled).await;
    let mut batch = plan(&b, &t, &[1_000, 2_000, 3_000]);
    batch.extend(plan(&b, &other, &[1_000]));
    assert_eq!(b.fires.insert_planned_fires(&batch, b.now()).await.unwrap(), 4);
    assert_eq!(b.fires.insert_planned_fires(&batch, b.now()).await.unwrap(), 0, "all exist");
    assert_eq!(b.fires.insert_planned_fires(&[], b.now()).await.unwrap(), 0);
    let now = b.now();
    assert_eq!(run_times(&b, &t).await, [now + 1_000, now + 2_000, now + 3_000]);
    let pending = b.fires.pending_between(Some(other.id), now, now + 10_000, 10).await.unwrap();
    assert_eq!(pending, [FireKey { timer_id: other.id, run_ms: now + 1_000 }], "pending, as any new fire");
}

pub async fn a_plan_of_a_replaced_definition_inserts_no_fire(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let untouched = timer(&b, "untouched", TimerStatus::Enabled).await;
    // A step reads both timers (every second) and plans their fires...
    let mut stale = plan(&b, &t, &[1_000, 2_000, 3_000, 4_000]);
    stale.extend(plan(&b, &untouched, &[1_000, 2_000]));
    // ... and an update of one commits before the plan is written.
    b.clock.advance(1);
    let updated = update_to(&b, &t, "*/2 * * * * *").await;
    assert_ne!(updated.modify_time, t.modify_time);
    assert_eq!(b.fires.insert_planned_fires(&stale, b.now()).await.unwrap(), 2, "only the untouched timer's");
    assert!(run_times(&b, &t).await.is_empty(), "no fire of the old definition after the update");
    assert_eq!(run_times(&b, &untouched).await.len(), 2);
    // The new definition's plan goes in.
    let fresh = plan(&b, &updated, &[1_999, 3_999]);
    assert_eq!(b.fires.insert_planned_fires(&fresh, b.now()).await.unwrap(), 2);
    assert_eq!(run_times(&b, &t).await.len(), 2);
}

pub async fn a_plan_of_a_timer_whose_status_changed_inserts_no_fire(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let stale = plan(&b, &t, &[1_000]);
    b.clock.advance(1);
    assert!(b.timers.set_timer_status(t.id, TimerStatus::Disabled, b.now()).await.unwrap());
    assert_eq!(b.fires.insert_planned_fires(&stale, b.now()).await.unwrap(), 0);
    let mut unknown = plan(&b, &t, &[2_000]);
    unknown[0].fire.key.timer_id = t.id + 1_000;
    assert_eq!(b.fires.insert_planned_fires(&unknown, b.now()).await.unwrap(), 0, "no fire of a timer not stored");
}

pub async fn a_plan_of_a_replaced_definition_moves_no_next_fire(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let untouched = timer(&b, "untouched", TimerStatus::Enabled).await;
    let later = b.now() + 86_400_000;
    let next = |timer: &Timer| NextRun { timer_id: timer.id, run_ms: Some(later), timer_modified: timer.modify_time };
    let stale = [next(&t), next(&untouched)];
    b.clock.advance(1);
    let updated = update_to(&b, &t, "*/2 * * * * *").await;
    b.timers.set_planned_next_runs(&stale).await.unwrap();
    let due: Vec<i64> = b.timers.due_timers(b.now() + 60_000, 10).await.unwrap().iter().map(|d| d.id).collect();
    assert_eq!(due, [t.id], "the updated timer stays marked for expansion; the untouched one moved");
    b.timers.set_planned_next_runs(&[next(&updated)]).await.unwrap();
    assert!(b.timers.due_timers(b.now() + 60_000, 10).await.unwrap().is_empty(), "the current plan moves it");
    b.timers.set_planned_next_runs(&[]).await.unwrap();
}

pub async fn a_spread_fire_is_placed_once_and_keeps_its_scheduled_time(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let s = b.now() + 60_000;
    // The first placement recorded wins: a second planner gets the same send time.
    let placed = b.fires.place_spread(&[(t.id, s, s + 2_000)]).await.unwrap();
    assert_eq!(placed[&(t.id, s)], s + 2_000);
    let again = b.fires.place_spread(&[(t.id, s, s + 5_000), (t.id, s + 60_000, s + 61_000)]).await.unwrap();
    assert_eq!((again[&(t.id, s)], again[&(t.id, s + 60_000)]), (s + 2_000, s + 61_000));
    let fire = PlannedFire {
        fire: NewFire { key: FireKey { timer_id: t.id, run_ms: s + 2_000 }, app: APP.into() },
        timer_modified: t.modify_time,
        scheduled_ms: Some(s),
    };
    assert_eq!(b.fires.insert_planned_fires(std::slice::from_ref(&fire), b.now()).await.unwrap(), 1);
    assert_eq!(b.fires.insert_planned_fires(&[fire], b.now()).await.unwrap(), 0, "one fire per scheduled time");
    // Its identity is its scheduled time; it is sent (and counted) at its run time.
    assert_eq!(b.fires.run_times_between(t.id, s, s + 1).await.unwrap(), [s]);
    let stored = crate::helpers::fire(&b, FireKey { timer_id: t.id, run_ms: s + 2_000 }).await;
    assert_eq!((stored.scheduled_ms, stored.run_ms), (s, s + 2_000));
    let second = s + 2_000 - (s + 2_000).rem_euclid(1000);
    assert_eq!(b.fires.planned_per_second(None, s, s + 10_000).await.unwrap(), [(second, 1)]);
    assert_eq!(b.fires.planned_per_second(Some(APP), s, s + 10_000).await.unwrap(), [(second, 1)]);
    assert!(b.fires.planned_per_second(Some("another-app"), s, s + 10_000).await.unwrap().is_empty());
    // An update from after its scheduled time leaves it; one from before takes it.
    assert_eq!(b.fires.delete_pending_from(t.id, s + 1).await.unwrap(), 0);
    let claimed =
        b.fires.claim(&[FireKey { timer_id: t.id, run_ms: s + 2_000 }], "n:1", 30_000, b.now()).await.unwrap();
    assert_eq!(claimed.claimed[0].scheduled_ms, s);
    assert_eq!(claimed.claimed[0].idempotency_key(), format!("{}_{s}", t.id));
    // Retention forgets placements of times before its keep time.
    assert_eq!(b.fires.forget_placements(s + 1, 100).await.unwrap(), 1);
    assert_eq!(b.fires.place_spread(&[(t.id, s, s + 5_000)]).await.unwrap()[&(t.id, s)], s + 5_000);
}

/// `t`'s spread fire scheduled at `scheduled_ms`, sent at `run_ms`, as the
/// migrator plans it (no scheduled time stored when they are equal).
fn spread_fire(t: &Timer, scheduled_ms: i64, run_ms: i64) -> PlannedFire {
    PlannedFire {
        fire: NewFire { key: key(t, run_ms), app: APP.into() },
        timer_modified: t.modify_time,
        scheduled_ms: (run_ms != scheduled_ms).then_some(scheduled_ms),
    }
}

pub async fn the_spread_load_counts_each_placement_and_each_pending_fire_once(b: Backend) {
    let (t, u) = (timer(&b, "t", TimerStatus::Enabled).await, timer(&b, "u", TimerStatus::Enabled).await);
    let s = b.now() - b.now().rem_euclid(1000) + 60_000;
    // Placed, their rows stored: at a later second, and at their own.
    b.fires.place_spread(&[(t.id, s, s + 2_000), (t.id, s + 10_000, s + 10_000)]).await.unwrap();
    let rows = [spread_fire(&t, s, s + 2_000), spread_fire(&t, s + 10_000, s + 10_000)];
    assert_eq!(b.fires.insert_planned_fires(&rows, b.now()).await.unwrap(), 2);
    // Placed, its row not stored yet (another planner's, in between).
    b.fires.place_spread(&[(t.id, s + 20_000, s + 23_000)]).await.unwrap();
    // A fire without spread, and a spread one already claimed.
    crate::helpers::insert(&b, &u, &[s + 2_000]).await;
    b.fires.place_spread(&[(u.id, s + 30_000, s + 31_000)]).await.unwrap();
    b.fires.insert_planned_fires(&[spread_fire(&u, s + 30_000, s + 31_000)], b.now()).await.unwrap();
    b.fires.claim(&[key(&u, s + 31_000)], "n:1", 30_000, b.now()).await.unwrap();
    let load = b.fires.spread_load(s, s + 60_000).await.unwrap();
    assert_eq!(load, [(s + 2_000, 2), (s + 10_000, 1), (s + 23_000, 1), (s + 31_000, 1)]);
    assert_eq!(b.fires.spread_load(s + 3_000, s + 23_000).await.unwrap(), [(s + 10_000, 1)], "half open");
}

pub async fn a_replan_forgets_the_placements_of_the_fires_it_deletes(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let now = b.now();
    let (s0, s1, s2, s3) = (now - 1_000, now + 60_000, now + 120_000, now + 180_000);
    // Scheduled before the update, pending after it; pending; claimed; placed only.
    let placed = [(t.id, s0, now + 2_000), (t.id, s1, s1 + 3_000), (t.id, s2, s2 + 4_000), (t.id, s3, s3 + 5_000)];
    b.fires.place_spread(&placed).await.unwrap();
    let rows: Vec<PlannedFire> = placed[..3].iter().map(|(_, s, r)| spread_fire(&t, *s, *r)).collect();
    assert_eq!(b.fires.insert_planned_fires(&rows, now).await.unwrap(), 3);
    b.fires.claim(&[key(&t, s2 + 4_000)], "n:1", 30_000, now).await.unwrap();
    assert_eq!(b.fires.delete_pending_from(t.id, now).await.unwrap(), 1);
    // Planned again: placed anew, but where a fire stays, where it is.
    let again = [(t.id, s0, s0 + 9_000), (t.id, s1, s1), (t.id, s2, s2), (t.id, s3, s3 + 1_000)];
    let placed = b.fires.place_spread(&again).await.unwrap();
    let at = |s: i64| placed[&(t.id, s)];
    assert_eq!((at(s0), at(s1), at(s2), at(s3)), (now + 2_000, s1, s2 + 4_000, s3 + 1_000));
}
