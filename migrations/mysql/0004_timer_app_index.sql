-- An app's timers by status: counting an app's usage the first time it is
-- needed (and getAppTimers' total) reads its own rows, not every timer.
-- Mirrors migrations/postgres/0009.
CREATE INDEX idx_timer_app_status ON t_timer (app, status);
