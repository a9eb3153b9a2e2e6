-- Saying when (API 1d).
-- An interval timer (kind 'every') fires every `every_ms` from `run_at`, its
-- anchor. `timing` holds the rest as JSON (startAt, endAt, maxFires and the
-- last run it leaves, spreadMs, excludeCalendars, misfireThresholdMs);
-- NULL says nothing beyond the schedule.
ALTER TABLE t_timer ADD COLUMN every_ms BIGINT;
ALTER TABLE t_timer ADD COLUMN timing TEXT;
-- A spread fire is sent (`run_timer`) later than it is scheduled: its
-- scheduled time, the fire's identity (`Idempotency-Key`); NULL: the same
-- as `run_timer` (every fire made before this migration, every fire
-- without spread), so no existing key changes.
ALTER TABLE t_timer_task ADD COLUMN scheduled_timer BIGINT;
-- Where each spread fire is sent, chosen once: a scheduled time planned
-- again (two planners, a restart) finds its send time here and makes the
-- same row, so (timer_id, scheduled_timer) stays unique as
-- (timer_id, run_timer) is.
CREATE TABLE IF NOT EXISTS t_fire_placement (
    timer_id        BIGINT  NOT NULL,
    scheduled_timer BIGINT  NOT NULL,
    run_timer       BIGINT  NOT NULL,
    PRIMARY KEY (timer_id, scheduled_timer)
);
CREATE INDEX IF NOT EXISTS idx_placement_scheduled ON t_fire_placement (scheduled_timer);
