-- Each timer keeps the first fire time not yet expanded into t_timer_task
-- (Unix ms): a migrator step reads only enabled timers due before its
-- horizon. 0 means "expand at the next step"; NULL, nothing left to expand.
ALTER TABLE t_timer ADD COLUMN next_run BIGINT;
UPDATE t_timer SET next_run = 0 WHERE status = 2;
CREATE INDEX IF NOT EXISTS idx_timer_next_run ON t_timer (status, next_run);
