-- t_timer_task partitioned by run time (Unix ms), so that a day of fire
-- history past retention.keep_fires_ms is dropped whole instead of deleted
-- row by row. The daily partitions (t_timer_task_pYYYYMMDD, UTC days
-- [start, next start)) are made by the store: at start-up, and by the
-- retention loop a few days ahead; t_timer_task_default holds any fire
-- outside them (rows from before this migration, fires far in the past or
-- future).
--
-- PostgreSQL wants the partition key in every unique constraint: the
-- primary key becomes (task_id, run_timer). task_id stays unique and
-- increasing: it still comes from the one sequence, which is kept.
--
-- Existing rows are copied (into the default partition) in this
-- migration's transaction; t_timer_task is locked meanwhile.

ALTER TABLE t_timer_task RENAME TO t_timer_task_old;
-- Index names are per schema: free the ones the new table takes.
ALTER TABLE t_timer_task_old RENAME CONSTRAINT t_timer_task_pkey TO t_timer_task_old_pkey;
ALTER TABLE t_timer_task_old RENAME CONSTRAINT uk_task_timer_run TO uk_task_timer_run_old;
ALTER INDEX idx_task_status_run RENAME TO idx_task_status_run_old;

CREATE TABLE t_timer_task (
    task_id     BIGINT   NOT NULL DEFAULT nextval('t_timer_task_task_id_seq'),
    timer_id    BIGINT   NOT NULL,
    app         TEXT     NOT NULL,
    run_timer   BIGINT   NOT NULL,
    status      SMALLINT NOT NULL DEFAULT 0,  -- 0 pending 1 running 2 succeeded 3 failed 4 skipped 5 missed
    attempt     INTEGER  NOT NULL DEFAULT 0,
    owner       TEXT,                         -- claim token while running
    lease_until BIGINT,
    output      TEXT     NOT NULL DEFAULT '',
    cost_time   BIGINT   NOT NULL DEFAULT 0,
    create_time BIGINT   NOT NULL,
    modify_time BIGINT   NOT NULL,
    manual      SMALLINT NOT NULL DEFAULT 0,  -- 0007: made by triggerTimer
    backfill_at BIGINT,                       -- 0010: made by backfillTimer, sent from then
    CONSTRAINT t_timer_task_pkey PRIMARY KEY (task_id, run_timer),
    -- The idempotency key of a fire.
    CONSTRAINT uk_task_timer_run UNIQUE (timer_id, run_timer)
) PARTITION BY RANGE (run_timer);

CREATE INDEX idx_task_status_run ON t_timer_task (status, run_timer);

CREATE TABLE t_timer_task_default PARTITION OF t_timer_task DEFAULT;

INSERT INTO t_timer_task (task_id, timer_id, app, run_timer, status, attempt, owner, lease_until, output,
                          cost_time, create_time, modify_time, manual, backfill_at)
SELECT task_id, timer_id, app, run_timer, status, attempt, owner, lease_until, output,
       cost_time, create_time, modify_time, manual, backfill_at
FROM t_timer_task_old;

-- The sequence goes on with the new table (and is not dropped with the old).
ALTER SEQUENCE t_timer_task_task_id_seq OWNED BY t_timer_task.task_id;
DROP TABLE t_timer_task_old;
