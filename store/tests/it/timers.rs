//! `TimerRepo` conformance.

use serde_json::json;
use xtimer_core::timer::{MisfirePolicy, RetryPolicy, Schedule, TimerStatus};
use xtimer_store::{Error, Quota, Refusal};

use crate::helpers::{claim_all, insert, new_timer, succeeded, timer, Backend, ADMIN, APP};

pub async fn created_timer_reads_back_field_for_field(b: Backend) {
    let mut input = new_timer(APP, "cron", TimerStatus::Enabled);
    input.retry = RetryPolicy { max_attempts: 5, backoff_ms: 1_500, no_retry_statuses: None };
    input.misfire = MisfirePolicy::Skip;
    let cron = b.timers.create_timer(&input, b.now()).await.unwrap();
    assert_eq!((cron.app.as_str(), cron.name.as_str(), cron.status), (APP, "cron", TimerStatus::Enabled));
    assert_eq!((cron.schedule.clone(), cron.notify.clone()), (input.schedule.clone(), input.notify.clone()));
    assert_eq!((&cron.retry, cron.misfire), (&input.retry, MisfirePolicy::Skip));
    assert_eq!((cron.create_time, cron.modify_time), (b.now(), b.now()));
    assert_eq!(b.timers.get_timer(cron.id).await.unwrap(), Some(cron.clone()));

    let mut once = new_timer(APP, "once", TimerStatus::Disabled);
    once.schedule = Schedule::Once { run_at_ms: b.now() + 90_000 };
    b.clock.advance(1_000);
    let once = b.timers.create_timer(&once, b.now()).await.unwrap();
    assert_ne!(once.id, cron.id, "every timer gets its own id");
    assert_eq!(once.create_time, b.now());
    assert_eq!(b.timers.get_timer(once.id).await.unwrap(), Some(once.clone()));
    assert_eq!(b.timers.get_timer(once.id.max(cron.id) + 1_000).await.unwrap(), None);
}

pub async fn get_timers_leaves_out_missing_ids(b: Backend) {
    let one = timer(&b, "one", TimerStatus::Enabled).await;
    let two = timer(&b, "two", TimerStatus::Disabled).await;
    assert!(b.timers.set_timer_status(two.id, TimerStatus::Deleted, b.now()).await.unwrap());
    let missing = one.id.max(two.id) + 1_000;
    let mut got = b.timers.get_timers(&[missing, two.id, one.id]).await.unwrap();
    got.sort_by_key(|t| t.id);
    let ids: Vec<(i64, TimerStatus)> = got.iter().map(|t| (t.id, t.status)).collect();
    assert_eq!(ids, vec![(one.id, TimerStatus::Enabled), (two.id, TimerStatus::Deleted)], "deleted ones included");
    assert!(b.timers.get_timers(&[]).await.unwrap().is_empty());
}

pub async fn app_timers_page_by_id_and_count_only_live_timers(b: Backend) {
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(timer(&b, &format!("t{i}"), TimerStatus::Enabled).await.id);
    }
    for i in 0..2 {
        b.timers.create_timer(&new_timer("other-app", &format!("t{i}"), TimerStatus::Enabled), b.now()).await.unwrap();
    }
    assert!(b.timers.set_timer_status(ids[2], TimerStatus::Deleted, b.now()).await.unwrap());
    let live: Vec<i64> = ids.iter().copied().filter(|&id| id != ids[2]).collect();

    let mut seen = Vec::new();
    for offset in [0, 2, 4] {
        let (page, total) = b.timers.list_app_timers(APP, offset, 2).await.unwrap();
        assert_eq!(total, 4, "deleted timers and other apps are not counted");
        assert!(page.iter().all(|t| t.app == APP && t.status != TimerStatus::Deleted), "{page:?}");
        seen.extend(page.iter().map(|t| t.id));
    }
    assert_eq!(seen, live, "pages are in id order, without gaps or repeats");
    let (beyond, total) = b.timers.list_app_timers(APP, 10, 2).await.unwrap();
    assert_eq!((beyond.len(), total), (0, 4));
    let (none, total) = b.timers.list_app_timers("no-such-app", 0, 10).await.unwrap();
    assert_eq!((none.len(), total), (0, 0));
}

pub async fn status_changes_until_the_timer_is_deleted(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Disabled).await;
    b.clock.advance(5_000);
    assert!(b.timers.set_timer_status(t.id, TimerStatus::Enabled, b.now()).await.unwrap());
    let got = b.timers.get_timer(t.id).await.unwrap().unwrap();
    assert_eq!((got.status, got.create_time, got.modify_time), (TimerStatus::Enabled, t.create_time, b.now()));
    assert!(b.timers.set_timer_status(t.id, TimerStatus::Disabled, b.now()).await.unwrap());
    assert_eq!(b.timers.get_timer(t.id).await.unwrap().unwrap().status, TimerStatus::Disabled);

    b.clock.advance(5_000);
    let deleted_at = b.now();
    assert!(b.timers.set_timer_status(t.id, TimerStatus::Deleted, deleted_at).await.unwrap());
    b.clock.advance(5_000);
    for status in [TimerStatus::Enabled, TimerStatus::Disabled, TimerStatus::Deleted] {
        assert!(!b.timers.set_timer_status(t.id, status, b.now()).await.unwrap(), "a deleted timer stays deleted");
    }
    let got = b.timers.get_timer(t.id).await.unwrap().expect("deleted timers are kept");
    assert_eq!((got.status, got.modify_time), (TimerStatus::Deleted, deleted_at));
    assert!(!b.timers.set_timer_status(t.id + 1_000, TimerStatus::Enabled, b.now()).await.unwrap(), "unknown id");
}

pub async fn names_are_unique_per_app_among_live_timers(b: Backend) {
    let first = timer(&b, "nightly", TimerStatus::Disabled).await;
    match b.timers.create_timer(&new_timer(APP, "nightly", TimerStatus::Enabled), b.now()).await {
        Err(Error::NameTaken { app, name }) => assert_eq!((app.as_str(), name.as_str()), (APP, "nightly")),
        other => panic!("a disabled timer still holds its name, got {other:?}"),
    }
    let elsewhere = b.timers.create_timer(&new_timer("other-app", "nightly", TimerStatus::Enabled), b.now()).await;
    assert!(elsewhere.is_ok(), "names are per app: {elsewhere:?}");

    assert!(b.timers.set_timer_status(first.id, TimerStatus::Deleted, b.now()).await.unwrap());
    let second = timer(&b, "nightly", TimerStatus::Enabled).await;
    assert_ne!(second.id, first.id);
    assert!(matches!(
        b.timers.create_timer(&new_timer(APP, "nightly", TimerStatus::Enabled), b.now()).await,
        Err(Error::NameTaken { .. })
    ));
    let (page, total) = b.timers.list_app_timers(APP, 0, 10).await.unwrap();
    assert_eq!((total, page[0].id), (1, second.id));
}

pub async fn enabled_timers_page_by_id(b: Backend) {
    let a = timer(&b, "a", TimerStatus::Enabled).await;
    let _disabled = timer(&b, "b", TimerStatus::Disabled).await;
    let c = timer(&b, "c", TimerStatus::Enabled).await;
    let d = timer(&b, "d", TimerStatus::Enabled).await;
    let e = timer(&b, "e", TimerStatus::Enabled).await;
    assert!(b.timers.set_timer_status(d.id, TimerStatus::Deleted, b.now()).await.unwrap());

    let ids = |list: Vec<xtimer_core::timer::Timer>| list.into_iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(b.timers.enabled_timers(0, 100).await.unwrap()), vec![a.id, c.id, e.id]);
    assert_eq!(ids(b.timers.enabled_timers(0, 2).await.unwrap()), vec![a.id, c.id]);
    assert_eq!(ids(b.timers.enabled_timers(c.id, 2).await.unwrap()), vec![e.id]);
    assert!(b.timers.enabled_timers(e.id, 2).await.unwrap().is_empty());
}

pub async fn create_timers_is_one_all_or_nothing_batch(b: Backend) {
    let batch: Vec<_> = (0..3).map(|i| new_timer(APP, &format!("bulk{i}"), TimerStatus::Enabled)).collect();
    let ids = b.timers.create_timers(&batch, b.now()).await.unwrap();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in input order: {ids:?}");
    for (id, input) in ids.iter().zip(&batch) {
        let got = b.timers.get_timer(*id).await.unwrap().expect("stored");
        assert_eq!(
            (got.name.as_str(), got.schedule.clone(), got.create_time),
            (input.name.as_str(), input.schedule.clone(), b.now())
        );
    }

    let clash = vec![new_timer(APP, "fresh", TimerStatus::Enabled), new_timer(APP, "bulk1", TimerStatus::Enabled)];
    assert!(matches!(b.timers.create_timers(&clash, b.now()).await, Err(Error::NameTaken { .. })));
    let twice = vec![new_timer(APP, "dup", TimerStatus::Enabled), new_timer(APP, "dup", TimerStatus::Disabled)];
    assert!(matches!(b.timers.create_timers(&twice, b.now()).await, Err(Error::NameTaken { .. })));
    let (_, total) = b.timers.list_app_timers(APP, 0, 100).await.unwrap();
    assert_eq!(total, 3, "a failed batch stores none of its timers");
    assert!(b.timers.create_timers(&[], b.now()).await.unwrap().is_empty());
}

pub async fn due_timers_follow_the_next_fire_index(b: Backend) {
    let ids = |list: Vec<xtimer_core::timer::Timer>| list.into_iter().map(|t| t.id).collect::<Vec<_>>();
    let a = timer(&b, "a", TimerStatus::Enabled).await;
    let c = timer(&b, "c", TimerStatus::Enabled).await;
    let off = timer(&b, "off", TimerStatus::Disabled).await;
    assert!(b.timers.due_timers(b.now(), 100).await.unwrap().is_empty(), "none fires before now");
    let mut due = ids(b.timers.due_timers(b.now() + 5_001, 100).await.unwrap());
    due.sort();
    assert_eq!(due, vec![a.id, c.id], "a new enabled timer is due from its first fire (every 5 s)");

    let later = b.now() + 3_600_000;
    b.timers.set_next_runs(&[(a.id, Some(later)), (c.id, None)]).await.unwrap();
    assert!(b.timers.due_timers(b.now() + 120_000, 100).await.unwrap().is_empty(), "not due within the horizon");
    assert_eq!(ids(b.timers.due_timers(later + 1, 100).await.unwrap()), vec![a.id], "nothing left to expand: never");

    assert!(b.timers.set_timer_status(off.id, TimerStatus::Enabled, b.now()).await.unwrap());
    assert!(b.timers.set_timer_status(c.id, TimerStatus::Disabled, b.now()).await.unwrap());
    assert!(b.timers.set_timer_status(c.id, TimerStatus::Enabled, b.now()).await.unwrap());
    let mut due = ids(b.timers.due_timers(b.now(), 100).await.unwrap());
    due.sort();
    assert_eq!(due, vec![c.id, off.id], "enabling marks a timer for expansion");
    assert!(b.timers.set_timer_status(a.id, TimerStatus::Disabled, b.now()).await.unwrap());
    assert!(!ids(b.timers.due_timers(later + 1, 100).await.unwrap()).contains(&a.id), "a disabled timer is not due");

    // A page takes the earliest due first, whatever the ids' order.
    assert!(c.id < off.id);
    b.timers.set_next_runs(&[(c.id, Some(b.now() + 1_800_000)), (off.id, Some(b.now() + 60_000))]).await.unwrap();
    assert_eq!(ids(b.timers.due_timers(b.now() + 2_000_000, 1).await.unwrap()), vec![off.id], "earliest first");
    assert_eq!(ids(b.timers.due_timers(b.now() + 2_000_000, 2).await.unwrap()), vec![off.id, c.id]);
}

/// A due page, and a read by ids, hold each timer exactly as stored, every
/// optional column set or not (SQLite reads both as one JSON value, the
/// others as rows; a timer alone is read as a row everywhere).
pub async fn a_due_page_reads_every_column_as_stored(b: Backend) {
    use xtimer_core::timer::{HttpNotify, LateAlert, OverlapPolicy};
    let alert = HttpNotify::post("http://127.0.0.1:9/alert");
    let mut full = new_timer(APP, "full \"quoted\" \u{e9}", TimerStatus::Enabled);
    full.schedule = Schedule::Every { every_ms: 90_000, anchor_ms: b.now() - 1_000, timezone: "Asia/Tokyo".into() };
    full.misfire = MisfirePolicy::FireOnce;
    full.delete_after_run = true;
    full.on_failure = Some(alert.clone());
    full.on_missed = Some(alert.clone());
    full.on_late = Some(LateAlert { threshold_ms: 250, notify: alert });
    full.pause_after_failures = Some(4);
    full.overlap = OverlapPolicy::Skip;
    full.timing.spread_ms = 5_000;
    full.timing.end_at = Some(b.now() + 86_400_000);
    full.labels = [("team".to_string(), "pay".to_string()), ("tier".to_string(), String::new())].into();
    let mut once = new_timer(APP, "once", TimerStatus::Enabled);
    once.schedule = Schedule::Once { run_at_ms: b.now() + 1_000 };
    let plain = new_timer(APP, "plain", TimerStatus::Enabled);
    let ids = b.timers.create_timers(&[full, once, plain], b.now()).await.unwrap();
    let mut due = b.timers.due_timers(b.now() + 3_600_000, 100).await.unwrap();
    due.sort_by_key(|t| t.id);
    assert_eq!(due.iter().map(|t| t.id).collect::<Vec<_>>(), ids);
    let mut many = b.timers.get_timers(&ids).await.unwrap();
    many.sort_by_key(|t| t.id);
    assert_eq!(many, due, "read by ids, as in a due page");
    for timer in due {
        assert_eq!(Some(&timer), b.timers.get_timer(timer.id).await.unwrap().as_ref(), "{}", timer.name);
    }
}

pub async fn history_notes_read_back_as_written_in_any_count(b: Backend) {
    use xtimer_store::HistoryEntry;
    let note = |timer_id: i64, i: i64, changes: &str| HistoryEntry {
        timer_id,
        app: APP.into(),
        at_ms: b.now() + i,
        action: if i % 2 == 0 { "create".into() } else { "update".into() },
        by: format!("app:{APP}"),
        changes: changes.into(),
    };
    // One note alone, then more than one statement of six parameters a row
    // holds (5,000 rows), spread over three timers, with quotes, commas,
    // braces and non-ASCII in the text (PostgreSQL binds them as arrays).
    let one = note(1, 0, "{}");
    b.timers.record_history(std::slice::from_ref(&one)).await.unwrap();
    assert_eq!(b.timers.timer_history(1, 10).await.unwrap(), vec![one]);
    let text = r#"{"name":["a "b", {c}","été é"],"tags":"{x,y}"}"#;
    let many: Vec<_> = (1..=6_000).map(|i| note(2 + i % 3, i, if i % 7 == 0 { "" } else { text })).collect();
    b.timers.record_history(&many).await.unwrap();
    for timer in 2..=4 {
        let mut want: Vec<_> = many.iter().filter(|e| e.timer_id == timer).cloned().collect();
        want.reverse();
        assert_eq!(b.timers.timer_history(timer, 5_000).await.unwrap(), want, "timer {timer}, newest first");
    }
    assert_eq!(b.timers.timer_history(1, 10).await.unwrap().len(), 1, "the first note is left as it was");
}

pub async fn next_runs_of_a_page_larger_than_one_batch_are_all_written(b: Backend) {
    // More timers than one SQLite batch statement takes (2,048), and an odd
    // count, so the last batch is padded.
    let batch: Vec<_> = (0..2_500).map(|i| new_timer(APP, &format!("t{i}"), TimerStatus::Enabled)).collect();
    let ids = b.timers.create_timers(&batch, b.now()).await.unwrap();
    let base = b.now() + 3_600_000;
    // Every third timer has nothing left to expand; the others, each its own time.
    let next: Vec<_> = ids.iter().enumerate().map(|(i, id)| (*id, (i % 3 != 0).then_some(base + i as i64))).collect();
    b.timers.set_next_runs(&next).await.unwrap();
    assert!(b.timers.due_timers(base, 10_000).await.unwrap().is_empty(), "none is due before its own time");
    let mut due: Vec<i64> = b.timers.due_timers(base + 3_000, 10_000).await.unwrap().iter().map(|t| t.id).collect();
    due.sort();
    let mut want: Vec<i64> = next.iter().filter(|(_, run)| run.is_some()).map(|(id, _)| *id).collect();
    want.sort();
    assert_eq!(due.len(), 1_666);
    assert_eq!(due, want, "each timer got its own next run, and those with none are never due");
    let first_of_second_batch = next[2_050];
    let at = first_of_second_batch.1.unwrap();
    let due_by: Vec<i64> = b.timers.due_timers(at + 1, 10_000).await.unwrap().iter().map(|t| t.id).collect();
    assert!(due_by.contains(&first_of_second_batch.0), "a timer of the second batch is due from its time");
    assert!(!due_by.contains(&next[2_051].0), "and the next one, a millisecond later, not yet");
}

pub async fn due_timers_read_across_the_due_index_windows(b: Backend) {
    let ids = |list: Vec<xtimer_core::timer::Timer>| {
        let mut ids: Vec<_> = list.into_iter().map(|t| t.id).collect();
        ids.sort();
        ids
    };
    // Window edges of the index (10 minutes), well after the test clock's now.
    const W: i64 = 600_000;
    let edge = (b.now() / W + 10) * W;
    let (last, first, older) = (
        timer(&b, "last", TimerStatus::Enabled).await,
        timer(&b, "first", TimerStatus::Enabled).await,
        timer(&b, "older", TimerStatus::Enabled).await,
    );
    let next = [(last.id, Some(edge - 1)), (first.id, Some(edge)), (older.id, Some(edge - 3 * W - 7))];
    b.timers.set_next_runs(&next).await.unwrap();
    assert_eq!(ids(b.timers.due_timers(edge - 1, 100).await.unwrap()), vec![older.id]);
    assert_eq!(ids(b.timers.due_timers(edge, 100).await.unwrap()), vec![last.id, older.id], "the window's last ms");
    let all = ids(b.timers.due_timers(edge + 1, 100).await.unwrap());
    assert_eq!(all, vec![last.id, first.id, older.id], "the next window's first ms");
    let page = b.timers.due_timers(edge + W * 5, 2).await.unwrap();
    assert_eq!(page.iter().map(|t| t.id).collect::<Vec<_>>(), vec![older.id, last.id], "earliest first");
}

pub async fn a_one_shot_completes_once_its_fire_has_ended(b: Backend) {
    let mut once = new_timer(APP, "once", TimerStatus::Enabled);
    once.schedule = Schedule::Once { run_at_ms: b.now() + 1_000 };
    let once = b.timers.create_timer(&once, b.now()).await.unwrap();
    let cron = timer(&b, "cron", TimerStatus::Enabled).await;
    let keys = insert(&b, &once, &[once_run(&once)]).await;
    insert(&b, &cron, &[b.now() + 1_000]).await;
    b.timers.set_next_runs(&[(once.id, None), (cron.id, None)]).await.unwrap();

    assert_eq!(b.timers.complete_fired_once(b.now()).await.unwrap(), 0, "its fire is still pending");
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    assert_eq!(b.timers.complete_fired_once(b.now()).await.unwrap(), 0, "its fire is running");
    assert_eq!(b.fires.record(&[succeeded(&claims[0], 3)], b.now()).await.unwrap(), 1);
    assert_eq!(b.timers.complete_fired_once(b.now()).await.unwrap(), 1);
    let got = b.timers.get_timer(once.id).await.unwrap().unwrap();
    assert_eq!(got.status, TimerStatus::Completed);
    assert_eq!(b.timers.get_timer(cron.id).await.unwrap().unwrap().status, TimerStatus::Enabled, "cron timers never");
    assert_eq!(b.timers.complete_fired_once(b.now()).await.unwrap(), 0, "once");
    let (listed, total) = b.timers.list_app_timers(APP, 0, 10).await.unwrap();
    assert_eq!((listed.len(), total), (2, 2), "a completed timer is still listed");
}

/// A one-shot holding `key` at `run_ms`.
fn keyed(name: &str, key: &str, run_ms: i64) -> xtimer_core::timer::NewTimer {
    let mut t = new_timer(APP, name, TimerStatus::Enabled);
    t.schedule = Schedule::Once { run_at_ms: run_ms };
    t.dedupe = Some(xtimer_core::timer::Dedupe::stored(key, run_ms));
    t
}

pub async fn a_dedupe_key_is_held_by_one_live_timer_until_it_completes_or_is_deleted(b: Backend) {
    let run = b.now() + 1_000;
    // Within one call: the first takes the key, the later ones are told who holds it.
    let outcomes = b
        .timers
        .create_each(
            &[keyed("a", "k", run), keyed("b", "k", run + 5), keyed("c", "other", run)],
            b.now(),
            &Quota::default(),
        )
        .await
        .unwrap();
    let held = *outcomes[0].as_ref().unwrap();
    assert_eq!(outcomes[1], Err(Refusal::KeyHeld { id: held, first_run_ms: run }));
    assert!(outcomes[2].is_ok(), "another key is free: {outcomes:?}");
    let stored = b.timers.get_timer(held).await.unwrap().unwrap();
    assert_eq!(stored.dedupe, Some(xtimer_core::timer::Dedupe::stored("k", run)), "reads back as stored");
    // Across calls, and for another app's key of the same name.
    let again = b.timers.create_each(&[keyed("d", "k", run + 9)], b.now(), &Quota::default()).await.unwrap();
    assert_eq!(again, vec![Err(Refusal::KeyHeld { id: held, first_run_ms: run })]);
    let mut elsewhere = keyed("a", "k", run);
    elsewhere.app = "other-app".into();
    assert!(b.timers.create_timer(&elsewhere, b.now()).await.is_ok(), "keys are per app");

    // Completed: the key is free, and the new holder's first run time its own.
    let keys = insert(&b, &stored, &[run]).await;
    b.timers.set_next_runs(&[(held, None)]).await.unwrap();
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    assert_eq!(b.fires.record(&[succeeded(&claims[0], 3)], b.now()).await.unwrap(), 1);
    assert_eq!(b.timers.complete_fired_once(b.now()).await.unwrap(), 1);
    let next = b.timers.create_timer(&keyed("e", "k", run + 20), b.now()).await.unwrap();
    assert_ne!(next.id, held);
    let refused = b.timers.create_each(&[keyed("f", "k", run)], b.now(), &Quota::default()).await.unwrap();
    assert_eq!(refused, vec![Err(Refusal::KeyHeld { id: next.id, first_run_ms: run + 20 })]);

    // Deleted, or released: free again.
    assert!(b.timers.set_timer_status(next.id, TimerStatus::Deleted, b.now()).await.unwrap());
    let last = b.timers.create_timer(&keyed("g", "k", run), b.now()).await.unwrap();
    assert!(b.timers.release_dedupe_key(last.id).await.unwrap());
    assert!(!b.timers.release_dedupe_key(last.id).await.unwrap(), "it holds none now");
    assert_eq!(b.timers.get_timer(last.id).await.unwrap().unwrap().dedupe, None);
    assert!(b.timers.create_timer(&keyed("h", "k", run), b.now()).await.is_ok());
}

fn once_run(t: &xtimer_core::timer::Timer) -> i64 {
    match t.schedule {
        Schedule::Once { run_at_ms } => run_at_ms,
        _ => unreachable!("a one-shot timer"),
    }
}

fn every_second(name: &str, status: TimerStatus) -> xtimer_core::timer::NewTimer {
    let mut t = new_timer(APP, name, status);
    t.schedule = Schedule::Cron { expr: "* * * * * *".into(), timezone: "UTC".into() };
    t
}

fn once_at(name: &str, run_at_ms: i64) -> xtimer_core::timer::NewTimer {
    let mut t = new_timer(APP, name, TimerStatus::Enabled);
    t.schedule = Schedule::Once { run_at_ms };
    t
}

pub async fn the_timer_quota_counts_live_timers_in_and_across_calls(b: Backend) {
    let quota = Quota { timers_per_app: 3, ..Quota::default() };
    let first = b.timers.create_each(&[new_timer(APP, "a", TimerStatus::Disabled)], b.now(), &quota).await.unwrap();
    let Ok(a) = first[0] else { panic!("{first:?}") };
    let names = ["b", "c", "d"].map(|n| new_timer(APP, n, TimerStatus::Enabled));
    let got = b.timers.create_each(&names, b.now(), &quota).await.unwrap();
    assert!(got[0].is_ok() && got[1].is_ok(), "{got:?}");
    assert_eq!(
        got[2],
        Err(Refusal::TooManyTimers { has: 1, adding: 3, max: 3 }),
        "the third of the call is one too many"
    );
    // Another app has its own count; a deleted timer frees its place.
    let other = b.timers.create_each(&[new_timer("other", "a", TimerStatus::Enabled)], b.now(), &quota).await.unwrap();
    assert!(other[0].is_ok());
    assert!(b.timers.set_status_within(a, TimerStatus::Deleted, b.now(), &quota, ADMIN).await.unwrap());
    let again = b.timers.create_each(&[new_timer(APP, "d", TimerStatus::Enabled)], b.now(), &quota).await.unwrap();
    assert!(again[0].is_ok(), "{again:?}");
    // All or none: a batch past the quota stores nothing and names its first refused item.
    let batch = [new_timer(APP, "e", TimerStatus::Enabled)];
    match b.timers.create_timers_within(&batch, b.now(), &quota).await {
        Err(Error::Refused { index: 0, refusal: Refusal::TooManyTimers { has: 3, .. }, .. }) => {}
        other => panic!("{other:?}"),
    }
}

pub async fn fires_per_minute_sum_cron_peaks_and_each_minutes_one_shots(b: Backend) {
    let quota = Quota { fires_per_minute_per_app: 100, ..Quota::default() };
    let t = b.timers.as_ref();
    let made = t.create_each(&[every_second("s1", TimerStatus::Enabled)], b.now(), &quota).await.unwrap();
    let Ok(s1) = made[0] else { panic!("{made:?}") };
    let refused = t.create_each(&[every_second("s2", TimerStatus::Enabled)], b.now(), &quota).await.unwrap();
    assert_eq!(refused[0], Err(Refusal::TooManyFires { fires: 120, own: 60, max: 100 }));
    let made = t.create_each(&[every_second("s2", TimerStatus::Disabled)], b.now(), &quota).await.unwrap();
    let Ok(s2) = made[0] else { panic!("{made:?}") };
    match t.set_status_within(s2, TimerStatus::Enabled, b.now(), &quota, ADMIN).await {
        Err(Error::Refused { refusal: Refusal::TooManyFires { fires: 120, .. }, .. }) => {}
        other => panic!("{other:?}"),
    }
    // A timer that alone passes the limit is refused even disabled.
    let tight = Quota { fires_per_minute_per_app: 30, ..Quota::default() };
    let alone = t.create_each(&[every_second("s3", TimerStatus::Disabled)], b.now(), &tight).await.unwrap();
    assert_eq!(alone[0], Err(Refusal::TooManyFires { fires: 60, own: 60, max: 30 }));

    // One-shots count in their own minute, on top of the crons' 60.
    let minute = (b.now() / 60_000 + 10) * 60_000;
    let shots: Vec<_> = (0..41).map(|i| once_at(&format!("o{i}"), minute + i * 1_000)).collect();
    let got = t.create_each(&shots, b.now(), &quota).await.unwrap();
    assert!(got[..40].iter().all(Result::is_ok), "{got:?}");
    assert_eq!(got[40], Err(Refusal::TooManyFires { fires: 101, own: 1, max: 100 }));
    let next_minute = t.create_each(&[once_at("o40", minute + 60_000)], b.now(), &quota).await.unwrap();
    assert!(next_minute[0].is_ok(), "another minute has room");
    // A cron now meets the fullest minute of one-shots: 60 + 40 + 1 > 100.
    let mut one_a_minute = every_second("m", TimerStatus::Enabled);
    one_a_minute.schedule = Schedule::Cron { expr: "0 * * * * *".into(), timezone: "UTC".into() };
    let refused = t.create_each(&[one_a_minute.clone()], b.now(), &quota).await.unwrap();
    assert_eq!(refused[0], Err(Refusal::TooManyFires { fires: 101, own: 1, max: 100 }));

    // Disabling frees what a timer added; enabling an enabled one is a no-op.
    assert!(t.set_status_within(s1, TimerStatus::Disabled, b.now(), &quota, ADMIN).await.unwrap());
    let made = t.create_each(&[one_a_minute], b.now(), &quota).await.unwrap();
    let Ok(m) = made[0] else { panic!("40 + 1 <= 100 once s1 is off: {made:?}") };
    assert!(t.set_status_within(m, TimerStatus::Enabled, b.now(), &quota, ADMIN).await.unwrap());
    match t.set_status_within(s2, TimerStatus::Enabled, b.now(), &quota, ADMIN).await {
        Err(Error::Refused { refusal: Refusal::TooManyFires { fires: 101, own: 60, .. }, .. }) => {}
        other => panic!("60 + 1 + 40 > 100: {other:?}"),
    }
    // Past minutes are forgotten; the next minute's one-shots stay counted.
    assert_eq!(t.forget_minutes(minute / 60_000).await.unwrap(), 0);
    assert_eq!(t.forget_minutes(minute / 60_000 + 1).await.unwrap(), 1);
}

/// One call over many apps counts each app as calls of one app would: the
/// usage of every app read (and locked) in one statement, what each enable
/// reads read ahead for all, and every change written in one statement;
/// apps counted for the first time, then the same apps again, then both.
pub async fn a_call_over_many_apps_counts_each_app_as_its_own(b: Backend) {
    let quota = Quota { timers_per_app: 4, fires_per_minute_per_app: 3 };
    let t = b.timers.as_ref();
    let m = (b.now() / 60_000 + 10) * 60_000;
    let shot = |app: &str, name: &str, at: i64| {
        let mut timer = once_at(name, at);
        timer.app = app.into();
        timer
    };
    let cron = |app: &str, name: &str, status: TimerStatus| {
        let mut timer = new_timer(app, name, status);
        timer.schedule = Schedule::Cron { expr: "0 * * * * *".into(), timezone: "UTC".into() };
        timer
    };
    let (on, off) = (TimerStatus::Enabled, TimerStatus::Disabled);
    let many = |n: u64, fires: u64| Err(Refusal::TooManyFires { fires, own: n, max: 3 });
    let full = |has: u64, adding: u64| Err(Refusal::TooManyTimers { has, adding, max: 4 });

    let first = [
        cron("many-a", "1", off),
        cron("many-b", "1", off),
        cron("many-a", "2", off),
        cron("many-a", "3", off),
        cron("many-a", "4", off),
        cron("many-a", "5", off),
        shot("many-c", "1", m),
        shot("many-c", "2", m + 1_000),
        shot("many-d", "1", m),
        cron("many-c", "cron", on),
        shot("many-c", "3", m),
        shot("many-c", "4", m + 60_000),
    ];
    let got = t.create_each(&first, b.now(), &quota).await.unwrap();
    assert!(got[..5].iter().all(Result::is_ok), "{got:?}");
    assert_eq!(got[5], full(0, 5));
    assert!(got[6..10].iter().all(Result::is_ok), "the cron: 2 in the fullest minute + 1: {got:?}");
    assert_eq!(got[10], many(1, 4), "the cron's 1 + the minute's 2 + 1");
    assert!(got[11].is_ok(), "another minute: {got:?}");

    // The same apps again: every count was written, and is read back.
    let second = [
        cron("many-a", "5", off),
        cron("many-b", "2", off),
        cron("many-d", "cron", on),
        shot("many-d", "2", m),
        shot("many-d", "3", m + 2_000),
        cron("many-c", "cron2", on),
    ];
    let got = t.create_each(&second, b.now(), &quota).await.unwrap();
    assert_eq!(got[0], full(4, 1));
    assert!(got[1].is_ok() && got[2].is_ok() && got[3].is_ok(), "{got:?}");
    assert_eq!(got[4], many(1, 4), "many-d: its cron's 1 + the minute's 2 + 1");
    assert_eq!(got[5], full(4, 1));

    // Both: an app counted for the first time beside counted ones.
    let third = [shot("many-e", "1", m), cron("many-d", "cron2", on), cron("many-b", "3", off)];
    let got = t.create_each(&third, b.now(), &quota).await.unwrap();
    assert!(got[0].is_ok() && got[2].is_ok(), "{got:?}");
    assert_eq!(got[1], many(1, 4), "many-d: 1 + the fullest minute's 2 + 1");
    for (app, live) in [("many-a", 4), ("many-b", 3), ("many-c", 4), ("many-d", 3), ("many-e", 1)] {
        let (_, total) = t.list_app_timers(app, 0, 10).await.unwrap();
        assert_eq!(total, live, "{app}");
    }
}

pub async fn a_name_taken_within_a_group_refuses_only_the_later_item(b: Backend) {
    let quota = Quota { timers_per_app: 3, ..Quota::default() };
    let group = [
        new_timer(APP, "x", TimerStatus::Enabled),
        new_timer(APP, "y", TimerStatus::Enabled),
        new_timer(APP, "x", TimerStatus::Enabled),
    ];
    let got = b.timers.create_each(&group, b.now(), &quota).await.unwrap();
    assert!(got[0].is_ok() && got[1].is_ok(), "{got:?}");
    assert_eq!(got[2], Err(Refusal::NameTaken));
    assert_ne!(got[0], got[1]);
    // The refused item was not counted: one more fits, then the quota is full.
    let more = [new_timer(APP, "z", TimerStatus::Enabled), new_timer(APP, "w", TimerStatus::Enabled)];
    let got = b.timers.create_each(&more, b.now(), &quota).await.unwrap();
    assert!(got[0].is_ok(), "{got:?}");
    assert!(matches!(got[1], Err(Refusal::TooManyTimers { .. })), "{got:?}");
    let (_, total) = b.timers.list_app_timers(APP, 0, 10).await.unwrap();
    assert_eq!(total, 3);
}

pub async fn update_replaces_the_definition_and_marks_it_for_expansion(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    timer(&b, "taken", TimerStatus::Disabled).await;
    b.timers.set_next_runs(&[(t.id, Some(b.now() + 3_600_000))]).await.unwrap();
    b.clock.advance(1_000);
    let mut new = new_timer(APP, "renamed", TimerStatus::Enabled);
    new.schedule = Schedule::Once { run_at_ms: b.now() + 5_000 };
    new.retry = RetryPolicy { max_attempts: 7, backoff_ms: 10, no_retry_statuses: None };
    new.delete_after_run = true;
    if let xtimer_core::timer::Notify::Http(http) = &new.notify {
        new.on_failure = Some(http.clone());
    }
    assert!(b.timers.update_timer(t.id, &new, b.now(), &Quota::default(), ADMIN, &json!({})).await.unwrap());
    let got = b.timers.get_timer(t.id).await.unwrap().unwrap();
    assert_eq!(got, xtimer_core::timer::Timer { create_time: t.create_time, ..new.stored(t.id, b.now()) });
    assert!(b.timers.due_timers(b.now(), 10).await.unwrap().iter().any(|d| d.id == t.id), "expanded at the next step");
    new.name = "taken".into();
    let err = b.timers.update_timer(t.id, &new, b.now(), &Quota::default(), ADMIN, &json!({})).await.unwrap_err();
    assert!(matches!(err, Error::NameTaken { .. }), "{err:?}");
    assert!(b.timers.set_timer_status(t.id, TimerStatus::Deleted, b.now()).await.unwrap());
    new.name = "again".into();
    assert!(
        !b.timers.update_timer(t.id, &new, b.now(), &Quota::default(), ADMIN, &json!({})).await.unwrap(),
        "a deleted timer is not updated"
    );
}

pub async fn a_one_shot_with_delete_after_run_is_deleted_once_its_fire_has_ended(b: Backend) {
    let mut once = new_timer(APP, "once", TimerStatus::Enabled);
    once.schedule = Schedule::Once { run_at_ms: b.now() + 1_000 };
    once.delete_after_run = true;
    let once = b.timers.create_timer(&once, b.now()).await.unwrap();
    assert!(once.delete_after_run);
    let keys = insert(&b, &once, &[once_run(&once)]).await;
    b.timers.set_next_runs(&[(once.id, None)]).await.unwrap();
    assert_eq!(b.timers.complete_fired_once(b.now()).await.unwrap(), 0, "its fire is still pending");
    let claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    assert_eq!(b.fires.record(&[succeeded(&claims[0], 3)], b.now()).await.unwrap(), 1);
    assert_eq!(b.timers.complete_fired_once(b.now()).await.unwrap(), 1);
    assert_eq!(b.timers.get_timer(once.id).await.unwrap().unwrap().status, TimerStatus::Deleted);
    let (_, total) = b.timers.list_app_timers(APP, 0, 10).await.unwrap();
    assert_eq!(total, 0, "deleted, not listed");
}

pub async fn pause_if_failing_counts_the_fires_that_ended_before(b: Backend) {
    use xtimer_core::fire::FireStatus;
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let keys = insert(&b, &t, &[b.now() + 1_000, b.now() + 2_000, b.now() + 3_000]).await;
    let mut claims = claim_all(&b, &keys, "node-a:1", 60_000).await;
    claims.sort_by_key(|c| c.key.run_ms);
    let failed = crate::helpers::result(&claims[0], FireStatus::Failed, 1, "HTTP 500", 0, None);
    assert_eq!(b.fires.record(&[failed, succeeded(&claims[1], 0)], b.now()).await.unwrap(), 2);
    let (id, last) = (t.id, claims[2].task_id);
    assert!(!b.timers.pause_if_failing(id, last, 2, 0, "why", b.now()).await.unwrap(), "the one before succeeded");
    assert!(!b.timers.pause_if_failing(id, last, 3, 0, "why", b.now()).await.unwrap());
    assert_eq!(b.timers.get_timer(id).await.unwrap().unwrap().status, TimerStatus::Enabled);
    assert!(b.timers.pause_if_failing(id, claims[1].task_id, 2, 0, "why", b.now()).await.unwrap(), "two in a row");
    let got = b.timers.get_timer(id).await.unwrap().unwrap();
    assert_eq!((got.status, got.pause_reason.as_deref()), (TimerStatus::Disabled, Some("why")));
    assert!(!b.timers.pause_if_failing(id, last, 1, 0, "again", b.now()).await.unwrap(), "already disabled");
    assert!(b.timers.set_timer_status(id, TimerStatus::Enabled, b.now()).await.unwrap());
    assert_eq!(b.timers.get_timer(id).await.unwrap().unwrap().pause_reason, None, "enabling clears the reason");
    let since = b.now() + 1;
    assert!(!b.timers.pause_if_failing(id, last, 2, since, "why", b.now()).await.unwrap(), "older fires do not count");
}
