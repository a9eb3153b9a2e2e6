-- Notifications a fire owes (mirrors migrations/postgres/0013): its timer's
-- onFailure (onMissed and onLate later), each stored in the transaction
-- that records the fire's result and deleted once sent or given up, so a
-- node that stops or crashes owing one leaves it for another. A table of
-- its own, not columns of t_timer_task: a fire that owes nothing (nearly
-- all) costs nothing (MySQL has no partial index).
CREATE TABLE IF NOT EXISTS t_notify_owed (
    task_id     BIGINT       NOT NULL,            -- the fire (t_timer_task)
    kind        SMALLINT     NOT NULL,            -- 1 onFailure (2 onMissed, 3 onLate: later)
    timer_id    BIGINT       NOT NULL,
    run_timer   BIGINT       NOT NULL,
    manual      SMALLINT     NOT NULL DEFAULT 0,  -- made by triggerTimer (its key ends in _manual)
    attempt     INT          NOT NULL,            -- the fire's attempts
    output      MEDIUMTEXT   NOT NULL,            -- the fire's last output
    sends       INT          NOT NULL DEFAULT 0,  -- sends tried so far, by any node
    owner       VARCHAR(255),                     -- the sender holding it
    send_at     BIGINT       NOT NULL,            -- its sender's lease ends (or its next send is due): anyone's from then
    create_time BIGINT       NOT NULL,
    PRIMARY KEY (task_id, kind),
    -- The sweep takes the ones whose lease lapsed, oldest first.
    KEY idx_notify_send_at (send_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
