-- The whole schema for MySQL 8 (and MariaDB 10.11), as of
-- migrations/postgres 0001-0006: timers and their fires, nodes, the
-- asyncflow cfg and position tables, tokens and signing secrets. Times are
-- Unix milliseconds, UTC. Text compares byte for byte (utf8mb4_bin), as in
-- the other dialects; indexed text is VARCHAR within the API's limits.

CREATE TABLE IF NOT EXISTS t_timer (
    timer_id    BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    app         VARCHAR(128) NOT NULL,
    name        VARCHAR(256) NOT NULL,
    status      SMALLINT     NOT NULL,            -- 1 disabled, 2 enabled, 3 deleted, 4 completed
    kind        VARCHAR(16)  NOT NULL,            -- cron | once
    cron        TEXT,
    timezone    VARCHAR(64)  NOT NULL DEFAULT 'UTC',
    run_at      BIGINT,
    notify      MEDIUMTEXT   NOT NULL,            -- JSON, kept as written
    retry       TEXT         NOT NULL,            -- JSON
    misfire     VARCHAR(32)  NOT NULL,
    create_time BIGINT       NOT NULL,
    modify_time BIGINT       NOT NULL,
    -- The first fire time not yet expanded into t_timer_task; 0: expand at
    -- the next step; NULL: nothing left to expand.
    next_run    BIGINT,
    -- The name while the timer is not deleted: a name is unique per app
    -- among live timers (MySQL has no partial index; NULLs never collide).
    live_name   VARCHAR(256) GENERATED ALWAYS AS (CASE WHEN status <> 3 THEN name END) STORED,
    UNIQUE KEY uk_timer_app_name (app, live_name),
    KEY idx_timer_status (status, timer_id),
    KEY idx_timer_next_run (status, next_run)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS t_timer_task (
    task_id     BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    timer_id    BIGINT       NOT NULL,
    app         VARCHAR(128) NOT NULL,
    run_timer   BIGINT       NOT NULL,
    status      SMALLINT     NOT NULL DEFAULT 0,  -- 0 pending 1 running 2 succeeded 3 failed 4 skipped 5 missed
    attempt     INT          NOT NULL DEFAULT 0,
    owner       VARCHAR(255),                     -- claim token while running
    lease_until BIGINT,
    output      MEDIUMTEXT   NOT NULL DEFAULT (''),
    cost_time   BIGINT       NOT NULL DEFAULT 0,
    create_time BIGINT       NOT NULL,
    modify_time BIGINT       NOT NULL,
    -- The idempotency key of a fire.
    UNIQUE KEY uk_task_timer_run (timer_id, run_timer),
    KEY idx_task_status_run (status, run_timer)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Nodes of the cluster, as they report themselves.
CREATE TABLE IF NOT EXISTS t_node (
    node_id      VARCHAR(255) NOT NULL PRIMARY KEY,
    host         TEXT         NOT NULL,
    listen       TEXT         NOT NULL,
    started_at   BIGINT       NOT NULL,
    heartbeat_at BIGINT       NOT NULL,
    shards       MEDIUMTEXT   NOT NULL DEFAULT ('[]')   -- JSON list of held shards
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- asyncflow: the configuration and table positions of each task type. The
-- task tables themselves (t_{type}_task_{pos}) are created on register and
-- when a table rolls.
CREATE TABLE IF NOT EXISTS t_schedule_cfg (
    task_type           VARCHAR(64)  NOT NULL PRIMARY KEY,
    schedule_limit      BIGINT       NOT NULL,
    schedule_interval   BIGINT       NOT NULL,
    max_processing_time BIGINT       NOT NULL,
    max_retry_num       BIGINT       NOT NULL,
    retry_interval      BIGINT       NOT NULL,
    max_retry_interval  BIGINT       NOT NULL,
    create_time         BIGINT       NOT NULL,   -- Unix ms
    modify_time         BIGINT       NOT NULL,
    -- The app that registered the type (NULL: registered with auth off,
    -- open to every app).
    owner_app           VARCHAR(128)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS t_schedule_pos (
    task_type           VARCHAR(64)  NOT NULL PRIMARY KEY,
    schedule_begin_pos  BIGINT       NOT NULL,   -- oldest table that may hold unfinished tasks
    schedule_end_pos    BIGINT       NOT NULL,   -- table new tasks go to
    create_time         BIGINT       NOT NULL,
    modify_time         BIGINT       NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Tokens issued by the admin endpoint, stored as the hex SHA-256 of the
-- token (the token itself is shown once, when issued).
CREATE TABLE IF NOT EXISTS t_api_token (
    token_hash  VARCHAR(128) NOT NULL PRIMARY KEY,
    app         VARCHAR(128) NOT NULL,
    create_time BIGINT       NOT NULL,   -- Unix ms
    KEY idx_api_token_app (app)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The key each app's callbacks are signed with; the row of app '' (never
-- a valid app) is the server-wide default.
CREATE TABLE IF NOT EXISTS t_app_secret (
    app         VARCHAR(128) NOT NULL PRIMARY KEY,
    secret      TEXT         NOT NULL,
    create_time BIGINT       NOT NULL    -- Unix ms
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
