-- A one-shot timer created with deleteAfterRun is deleted, not completed,
-- once its fire has ended (1 yes, 0 no). Mirrors migrations/postgres/0007.
ALTER TABLE t_timer ADD COLUMN delete_after_run SMALLINT NOT NULL DEFAULT 0;
-- A fire made by triggerTimer rather than by the schedule (1 yes, 0 no).
ALTER TABLE t_timer_task ADD COLUMN manual SMALLINT NOT NULL DEFAULT 0;
-- The HTTP notify called once when a fire ends failed (onFailure): JSON
-- {url, method, headers, body}; NULL: none.
ALTER TABLE t_timer ADD COLUMN on_failure MEDIUMTEXT;
-- pauseAfterFailures: disable the timer after this many consecutive failed
-- fires (NULL: never), and why it was disabled so (NULL once enabled again).
ALTER TABLE t_timer ADD COLUMN pause_after_failures INT;
ALTER TABLE t_timer ADD COLUMN pause_reason TEXT;
-- overlap: allow | skip | buffer_one, what a fire does while the fire before
-- it of the same timer is still running.
ALTER TABLE t_timer ADD COLUMN overlap VARCHAR(16) NOT NULL DEFAULT 'allow';
