-- Alerts (API 1h): a timer's onMissed, the HTTP notify called when one of
-- its fires is recorded missed or skipped, as JSON {url, method, headers};
-- and its onLate, {"thresholdMs", "notify"}, called once for a fire whose
-- first callback left later than thresholdMs after its scheduled time.
-- NULL: none. Mirrors migrations/postgres/0019. What they owe is stored in
-- t_notify_owed with kind 2 (onMissed) and 3 (onLate), beside 1
-- (onFailure): its key (task_id, kind) holds one of each per fire.
ALTER TABLE t_timer ADD COLUMN on_missed MEDIUMTEXT;
ALTER TABLE t_timer ADD COLUMN on_late MEDIUMTEXT;
