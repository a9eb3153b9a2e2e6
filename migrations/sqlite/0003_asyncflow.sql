-- asyncflow: the configuration and table positions of each task type. The
-- task tables themselves (t_{type}_task_{pos}) are created on register and
-- when a table rolls.
CREATE TABLE IF NOT EXISTS t_schedule_cfg (
    task_type           TEXT    PRIMARY KEY,
    schedule_limit      INTEGER NOT NULL,
    schedule_interval   INTEGER NOT NULL,
    max_processing_time INTEGER NOT NULL,
    max_retry_num       INTEGER NOT NULL,
    retry_interval      INTEGER NOT NULL,
    max_retry_interval  INTEGER NOT NULL,
    create_time         INTEGER NOT NULL,   -- Unix ms
    modify_time         INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS t_schedule_pos (
    task_type           TEXT    PRIMARY KEY,
    schedule_begin_pos  INTEGER NOT NULL,   -- oldest table that may hold unfinished tasks
    schedule_end_pos    INTEGER NOT NULL,   -- table new tasks go to
    create_time         INTEGER NOT NULL,
    modify_time         INTEGER NOT NULL
);
