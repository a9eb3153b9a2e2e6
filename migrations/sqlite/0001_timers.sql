-- Timers and their fires. Times are Unix milliseconds, UTC.

CREATE TABLE IF NOT EXISTS t_timer (
    timer_id    INTEGER PRIMARY KEY AUTOINCREMENT,
    app         TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    status      INTEGER NOT NULL,            -- 1 disabled, 2 enabled, 3 deleted
    kind        TEXT    NOT NULL,            -- cron | once
    cron        TEXT,
    timezone    TEXT    NOT NULL DEFAULT 'UTC',
    run_at      INTEGER,
    notify      TEXT    NOT NULL,            -- JSON
    retry       TEXT    NOT NULL,            -- JSON
    misfire     TEXT    NOT NULL,
    create_time INTEGER NOT NULL,
    modify_time INTEGER NOT NULL
);

-- A name is unique per app among timers that are not deleted.
CREATE UNIQUE INDEX IF NOT EXISTS uk_timer_app_name ON t_timer (app, name) WHERE status <> 3;
CREATE INDEX IF NOT EXISTS idx_timer_status ON t_timer (status, timer_id);

CREATE TABLE IF NOT EXISTS t_timer_task (
    task_id     INTEGER PRIMARY KEY,
    timer_id    INTEGER NOT NULL,
    app         TEXT    NOT NULL,
    run_timer   INTEGER NOT NULL,
    status      INTEGER NOT NULL DEFAULT 0,  -- 0 pending 1 running 2 succeeded 3 failed 4 skipped 5 missed
    attempt     INTEGER NOT NULL DEFAULT 0,
    owner       TEXT,                        -- claim token while running
    lease_until INTEGER,
    output      TEXT    NOT NULL DEFAULT '',
    cost_time   INTEGER NOT NULL DEFAULT 0,
    create_time INTEGER NOT NULL,
    modify_time INTEGER NOT NULL,
    UNIQUE (timer_id, run_timer)
);

CREATE INDEX IF NOT EXISTS idx_task_status_run ON t_timer_task (status, run_timer);
