-- Timers and their fires. Times are Unix milliseconds, UTC.
-- Mirrors migrations/sqlite/0001_timers.sql; the migrator holds an advisory
-- lock while it applies this, so nodes starting at once apply it once.

CREATE TABLE IF NOT EXISTS t_timer (
    timer_id    BIGSERIAL PRIMARY KEY,
    app         TEXT     NOT NULL,
    name        TEXT     NOT NULL,
    status      SMALLINT NOT NULL,            -- 1 disabled, 2 enabled, 3 deleted
    kind        TEXT     NOT NULL,            -- cron | once
    cron        TEXT,
    timezone    TEXT     NOT NULL DEFAULT 'UTC',
    run_at      BIGINT,
    notify      TEXT     NOT NULL,            -- JSON, kept as written
    retry       TEXT     NOT NULL,            -- JSON
    misfire     TEXT     NOT NULL,
    create_time BIGINT   NOT NULL,
    modify_time BIGINT   NOT NULL
);

-- A name is unique per app among timers that are not deleted.
CREATE UNIQUE INDEX IF NOT EXISTS uk_timer_app_name ON t_timer (app, name) WHERE status <> 3;
CREATE INDEX IF NOT EXISTS idx_timer_status ON t_timer (status, timer_id);

CREATE TABLE IF NOT EXISTS t_timer_task (
    task_id     BIGSERIAL PRIMARY KEY,
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
    -- The idempotency key of a fire.
    CONSTRAINT uk_task_timer_run UNIQUE (timer_id, run_timer)
);

CREATE INDEX IF NOT EXISTS idx_task_status_run ON t_timer_task (status, run_timer);
