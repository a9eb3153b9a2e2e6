-- An app's timers by status: counting an app's usage the first time it is
-- needed (and getAppTimers' total) reads its own rows, not every timer.
CREATE INDEX IF NOT EXISTS idx_timer_app_status ON t_timer (app, status);
