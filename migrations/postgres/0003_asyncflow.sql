-- asyncflow: the configuration and table positions of each task type. The
-- task tables themselves (t_{type}_task_{pos}) are created on register and
-- when a table rolls.
CREATE TABLE IF NOT EXISTS t_schedule_cfg (
    task_type           TEXT    PRIMARY KEY,
    schedule_limit      BIGINT NOT NULL,
    schedule_interval   BIGINT NOT NULL,
    max_processing_time BIGINT NOT NULL,
    max_retry_num       BIGINT NOT NULL,
    retry_interval      BIGINT NOT NULL,
    max_retry_interval  BIGINT NOT NULL,
    create_time         BIGINT NOT NULL,   -- Unix ms
    modify_time         BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS t_schedule_pos (
    task_type           TEXT    PRIMARY KEY,
    schedule_begin_pos  BIGINT NOT NULL,   -- oldest table that may hold unfinished tasks
    schedule_end_pos    BIGINT NOT NULL,   -- table new tasks go to
    create_time         BIGINT NOT NULL,
    modify_time         BIGINT NOT NULL
);
