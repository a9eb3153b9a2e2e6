//! `FireRepo` conformance for the per-timer figures (`getTimer`'s
//! `stats`): hours rolled up into a row per timer read back as the fires
//! they came from, at any rate (a timer firing every second has 86,400
//! fires a day), for a bounded read; paced fires (backfilled or replayed)
//! counted apart from the lateness; a replay or a backfill after its hour
//! was rolled up shows at once.

use xtimer_core::fire::FireStatus;
use xtimer_core::timer::TimerStatus;
use xtimer_store::{BackfillFire, Database, NewFire, TimerFigures, STATS_HOUR_MS as HOUR};

use crate::helpers::{insert, key, result, timer, Backend};

/// How long after its end an hour is rolled up (the loop's `SETTLE_MS`).
const SETTLE_MS: i64 = 600_000;

/// Runs `sql` (no binds: the same text in every dialect).
async fn exec(b: &Backend, sql: &str) -> u64 {
    match &b.db {
        Database::Sqlite { write, .. } => sqlx::query(sql).execute(write).await.unwrap().rows_affected(),
        Database::Postgres(pool) => sqlx::query(sql).execute(pool).await.unwrap().rows_affected(),
        Database::Mysql(pool) => sqlx::query(sql).execute(pool).await.unwrap().rows_affected(),
    }
}

/// The outcome every fixture fire at `run` ends with, by its time alone:
/// mostly succeeded, some failed, a few missed; its lateness, ms.
fn outcome(run: i64) -> (FireStatus, i64) {
    let second = run / 1_000;
    let status = if second % 97 == 0 {
        FireStatus::Missed
    } else if second % 13 == 0 {
        FireStatus::Failed
    } else {
        FireStatus::Succeeded
    };
    let late = match second % 100 {
        0 => 45_000 + second % 1_000 * 40, // past the last bound, now and then
        n if n < 90 => n * 3 % 17,
        n => n * 97,
    };
    (status, if status == FireStatus::Missed { 0 } else { late })
}

/// Ends timer `timer_id`'s fires run in `[from, to)` as [`outcome`] says,
/// in SQL (a day of a per-second timer is more claims and results than a
/// test should make one by one).
async fn end_fires(b: &Backend, timer_id: i64, from: i64, to: i64) {
    let second = "(run_timer / 1000)";
    let late = format!(
        "CASE WHEN {second} % 100 = 0 THEN 45000 + {second} % 1000 * 40
              WHEN {second} % 100 < 90 THEN {second} % 100 * 3 % 17 ELSE {second} % 100 * 97 END"
    );
    let sql = format!(
        "UPDATE t_timer_task SET attempt = 1,
             status = CASE WHEN {second} % 97 = 0 THEN {missed} WHEN {second} % 13 = 0 THEN {failed} ELSE {ok} END,
             cost_time = CASE WHEN {second} % 97 = 0 THEN 0 ELSE {late} END
         WHERE timer_id = {timer_id} AND run_timer >= {from} AND run_timer < {to}",
        missed = FireStatus::Missed.code(),
        failed = FireStatus::Failed.code(),
        ok = FireStatus::Succeeded.code(),
    );
    exec(b, &sql).await;
}

/// The figures of fires at `runs` whose outcomes are `ended(run)` (`None`:
/// still pending), none paced: what a read must say.
fn expected(runs: impl IntoIterator<Item = i64>, ended: impl Fn(i64) -> Option<(FireStatus, i64)>) -> TimerFigures {
    let mut f = TimerFigures::default();
    for run in runs {
        f.fires += 1;
        let Some((status, late)) = ended(run) else { continue };
        match status {
            FireStatus::Succeeded => f.succeeded += 1,
            FireStatus::Failed => f.failed += 1,
            FireStatus::Missed => f.missed += 1,
            _ => {}
        }
        if matches!(status, FireStatus::Succeeded | FireStatus::Failed) {
            f.late[TimerFigures::bucket_of(late)] += 1;
            f.late_max = f.late_max.max(Some(late));
        }
    }
    f
}

/// The figures without what the read cost.
fn figures_only(f: TimerFigures) -> TimerFigures {
    TimerFigures { rolled_hours: 0, raw_fires: 0, ..f }
}

/// Rolls up every settled hour as of the clock, as the loop does (from 25
/// hours back); returns the hours rolled.
async fn roll_up(b: &Backend) -> Vec<i64> {
    let now = b.now();
    let oldest = now.div_euclid(HOUR) * HOUR - 25 * HOUR;
    let mut hours = Vec::new();
    while let Some(hour) = b.fires.roll_up_hour(now - SETTLE_MS, oldest).await.unwrap() {
        hours.push(hour);
        assert!(hours.len() <= 30, "a roll-up ends: {hours:?}");
    }
    hours
}

/// A timer firing every second: its day's figures (more than 10,000 fires)
/// read back from the rolled hours as they are in its fire rows, by
/// status and by lateness bucket, reading at most 24 hour rows and the
/// fires of the hour not rolled up yet. Another timer's fires stay its own.
pub async fn a_day_of_a_timer_firing_every_second_rolls_up_into_its_figures(b: Backend) {
    let t = timer(&b, "every-second", TimerStatus::Enabled).await;
    let u = timer(&b, "every-minute", TimerStatus::Enabled).await;
    let now = b.now();
    // 26 hours back to 10 minutes ahead; those of the last 5 s still pending.
    let start = now - 26 * HOUR;
    let runs: Vec<i64> = (start..now + 600_000).step_by(1_000).collect();
    let fires: Vec<NewFire> = runs.iter().map(|&run| NewFire { key: key(&t, run), app: t.app.clone() }).collect();
    assert_eq!(b.fires.insert_fires(&fires, now).await.unwrap(), runs.len() as u64);
    let minutes: Vec<i64> = (start..now).step_by(60_000).collect();
    insert(&b, &u, &minutes).await;
    end_fires(&b, t.id, start, now - 5_000).await;
    end_fires(&b, u.id, start, now).await;

    let from = now.div_euclid(HOUR) * HOUR - 24 * HOUR;
    let ended = |run: i64| (run < now - 5_000).then(|| outcome(run));
    let want = expected(runs.iter().copied().filter(|r| (from..=now).contains(r)), ended);
    assert!(want.fires > 86_400 && want.succeeded > 10_000, "a day and more: {want:?}");

    // Nothing rolled up yet: every fire of the window counted.
    let raw = b.fires.timer_figures(t.id, now - 24 * HOUR, now).await.unwrap();
    assert_eq!(figures_only(raw), want);
    assert_eq!((raw.rolled_hours, raw.raw_fires), (0, want.fires));

    let hours = roll_up(&b).await;
    let this_hour = now.div_euclid(HOUR) * HOUR;
    let oldest = this_hour - 25 * HOUR;
    assert_eq!(hours, (oldest..this_hour).step_by(HOUR as usize).collect::<Vec<_>>(), "each settled hour once");
    assert_eq!(roll_up(&b).await, Vec::<i64>::new(), "rolled once");

    let rolled = b.fires.timer_figures(t.id, now - 24 * HOUR, now).await.unwrap();
    assert_eq!(figures_only(rolled), want, "the hours rolled up read as their fires");
    assert_eq!(rolled.rolled_hours, 24, "an hour row per hour of the window");
    assert_eq!(rolled.raw_fires as i64, (now - this_hour) / 1_000 + 1, "and the fires of the hour not rolled up only");
    let p50 = rolled.late_percentile(50).unwrap();
    assert!((0..=20).contains(&p50), "{rolled:?}");

    let other = b.fires.timer_figures(u.id, now - 24 * HOUR, now).await.unwrap();
    let want_u = expected(minutes.iter().copied().filter(|r| (from..=now).contains(r)), |run| Some(outcome(run)));
    assert_eq!(figures_only(other), want_u);

    // 40 minutes on, its fires up to then sent: the hour is over and settled.
    let before = now;
    b.clock.advance(40 * 60_000);
    let now = b.now();
    end_fires(&b, t.id, before - 5_000, now).await;
    assert_eq!(roll_up(&b).await, vec![this_hour], "the hour just settled");
    let later = b.fires.timer_figures(t.id, now - 24 * HOUR, now).await.unwrap();
    let from = now.div_euclid(HOUR) * HOUR - 24 * HOUR;
    let want = expected(runs.iter().copied().filter(|r| (from..=now).contains(r)), |run| Some(outcome(run)));
    assert_eq!(figures_only(later), want);
    assert_eq!((later.rolled_hours, later.raw_fires), (24, 0), "no fire planned past the last hour rolled");

    // Rolled hours past what any read covers are forgotten.
    let mut forgotten = Vec::new();
    loop {
        match b.fires.forget_rolled_hours(this_hour - 23 * HOUR, 1).await.unwrap() {
            0 => break,
            n => forgotten.push(n),
        }
    }
    assert_eq!(forgotten, [1, 1, 1, 1], "the two oldest hours of both timers, a row at a time");
    let kept = b.fires.timer_figures(t.id, now - 24 * HOUR, now).await.unwrap();
    assert_eq!(kept, later);
}

/// Replayed and backfilled fires count as fires by status, apart from the
/// lateness; a replay or a backfill into an hour already rolled up shows
/// at once (the hour is counted from its fires until it is rolled up
/// again, which waits for its fires under way to end).
pub async fn paced_fires_are_counted_apart_and_a_change_after_the_roll_up_shows_at_once(b: Backend) {
    let t = timer(&b, "t", TimerStatus::Enabled).await;
    let now = b.now();
    let this_hour = now.div_euclid(HOUR) * HOUR;
    // Every 10 s of the last three hours: 5 ms late; the ones at :x0:00 fail, 8 ms late.
    let runs: Vec<i64> = (this_hour - 3 * HOUR..now - 60_000).step_by(10_000).collect();
    insert(&b, &t, &runs).await;
    let late = |run: i64| if run % 600_000 == 0 { (FireStatus::Failed, 8) } else { (FireStatus::Succeeded, 5) };
    let (ok, failed) = (FireStatus::Succeeded.code(), FireStatus::Failed.code());
    let id = t.id;
    exec(&b, &format!("UPDATE t_timer_task SET status = {ok}, attempt = 1, cost_time = 5 WHERE timer_id = {id}")).await;
    let every_ten_minutes = format!("timer_id = {id} AND run_timer % 600000 = 0");
    exec(&b, &format!("UPDATE t_timer_task SET status = {failed}, cost_time = 8 WHERE {every_ten_minutes}")).await;
    roll_up(&b).await;
    let before = b.fires.timer_figures(t.id, now - 24 * HOUR, now).await.unwrap();
    let want = expected(runs.iter().copied(), |run| Some(late(run)));
    assert_eq!(figures_only(before), want);
    assert_eq!(before.rolled_hours, 3);
    assert_eq!((before.late_percentile(50), before.late_percentile(99)), (Some(5), Some(8)));

    // Replay the failed fires of the oldest hour: pending again, paced.
    let replayed_hour = this_hour - 3 * HOUR;
    let failed =
        b.fires.replayable(&[t.id], &[FireStatus::Failed], replayed_hour, replayed_hour + HOUR, 100).await.unwrap();
    assert_eq!(failed.len(), 6);
    let ids: Vec<i64> = failed.iter().map(|(id, ..)| *id).collect();
    let paced: Vec<(i64, i64)> = ids.iter().map(|id| (*id, now)).collect();
    assert_eq!(b.fires.replay(&paced, &[FireStatus::Failed], now).await.unwrap(), 6);
    let replaying = b.fires.timer_figures(t.id, now - 24 * HOUR, now).await.unwrap();
    assert_eq!((replaying.fires, replaying.failed, replaying.paced), (want.fires, want.failed - 6, 6), "at once");
    assert_eq!(replaying.late.iter().sum::<u64>(), want.late.iter().sum::<u64>() - 6, "left out of the lateness");
    let this_hours = runs.iter().filter(|run| **run >= this_hour).count() as u64;
    assert_eq!(
        (replaying.rolled_hours, replaying.raw_fires),
        (2, 360 + this_hours),
        "the replayed hour counted from its fires, as this hour's"
    );

    // Rolled up again while they are under way: still counted from the fires.
    assert_eq!(b.fires.reroll_stale_hours(this_hour - 25 * HOUR, 100).await.unwrap(), 1);
    assert_eq!(b.fires.timer_figures(t.id, now - 24 * HOUR, now).await.unwrap(), replaying);

    // Sent an hour late, and succeeded: counted, never in the lateness.
    let claimed = b.fires.reclaim(&ids, "node-a:9", 60_000, now, i64::MIN).await.unwrap().claimed;
    assert_eq!(claimed.len(), 6);
    let results: Vec<_> =
        claimed.iter().map(|c| result(c, FireStatus::Succeeded, c.attempt + 1, "HTTP 200", 3_600_000, None)).collect();
    assert_eq!(b.fires.record(&results, now).await.unwrap(), 6);
    let replayed = b.fires.timer_figures(t.id, now - 24 * HOUR, now).await.unwrap();
    assert_eq!((replayed.succeeded, replayed.failed, replayed.paced), (want.succeeded + 6, want.failed - 6, 6));
    assert_eq!((replayed.late, replayed.late_max), (replaying.late, Some(8)), "the replays' hour of lateness left out");
    assert_eq!(b.fires.reroll_stale_hours(this_hour - 25 * HOUR, 100).await.unwrap(), 1, "now ended: rolled up");
    assert_eq!(b.fires.reroll_stale_hours(this_hour - 25 * HOUR, 100).await.unwrap(), 0, "and trusted again");
    let rerolled = b.fires.timer_figures(t.id, now - 24 * HOUR, now).await.unwrap();
    assert_eq!(figures_only(rerolled), figures_only(replayed));
    assert_eq!(rerolled.rolled_hours, 3);

    // The console's lateness reads ended fires marked paced or not.
    let ended = b.fires.ended_since_paced(this_hour - 3 * HOUR, 10_000).await.unwrap();
    let paced: Vec<i64> = ended.iter().filter(|(_, paced)| *paced).map(|(f, _)| f.task_id).collect();
    assert_eq!((ended.len(), paced.len()), (runs.len(), 6), "every ended fire, the replayed ones paced");
    assert!(paced.iter().all(|id| ids.contains(id)));

    // Backfilled into a rolled hour, between its fires: counted at once,
    // paced, pending until sent.
    let backfill: Vec<BackfillFire> = (0..4)
        .map(|i| BackfillFire {
            fire: NewFire { key: key(&t, this_hour - 2 * HOUR + 5_000 + i * 10_000), app: t.app.clone() },
            send_at_ms: now + i,
        })
        .collect();
    assert_eq!(b.fires.insert_backfill(&backfill, now).await.unwrap(), 4);
    let backfilled = b.fires.timer_figures(t.id, now - 24 * HOUR, now).await.unwrap();
    assert_eq!((backfilled.fires, backfilled.paced), (want.fires + 4, 10));
    assert_eq!(backfilled.late, rerolled.late);
    assert_eq!(backfilled.rolled_hours, 2);
}
