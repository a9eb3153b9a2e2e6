-- The migrator's index of enabled timers by next fire, keyed so that
-- creating appends instead of scattering: entries group by ten-minute
-- window of `next_run` and within it by timer id (ever growing), with
-- `next_run` itself carried for the step's filter. Keyed on `next_run`
-- alone, a batch of timers due at a thousand different times wrote a
-- thousand different index pages once the table held a million timers,
-- so creating slowed as the table grew. A step reads the windows up to
-- its horizon's; the window width is `timers::DUE_WINDOW_MS`.
DROP INDEX IF EXISTS idx_timer_next_run;
CREATE INDEX IF NOT EXISTS idx_timer_due ON t_timer (status, next_run / 600000, timer_id, next_run);
