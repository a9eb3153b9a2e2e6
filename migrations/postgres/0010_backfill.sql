-- A fire made by backfillTimer (mirrors migrations/sqlite/0010): the time (Unix ms) from which the reconciler
-- may send it; NULL for a scheduled or manual fire. A backfilled fire is past
-- due when made; the reconciler sends it once this time has come, whatever
-- its timer's misfire policy, so a backfill goes out oldest first at a
-- bounded pace and resumes on another node after a crash.
ALTER TABLE t_timer_task ADD COLUMN backfill_at BIGINT;
