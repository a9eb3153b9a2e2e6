-- Notifications a fire owes (its timer's onFailure; onMissed and onLate
-- later), each stored in the transaction that records the fire's result
-- and deleted once sent or given up, so a node that stops or crashes
-- owing one leaves it for another. A table of its own, not columns of
-- t_timer_task: a fire that owes nothing (nearly all) costs nothing, and
-- the table holds only what is owed now.
CREATE TABLE IF NOT EXISTS t_notify_owed (
    task_id     INTEGER NOT NULL,            -- the fire (t_timer_task)
    kind        INTEGER NOT NULL,            -- 1 onFailure (2 onMissed, 3 onLate: later)
    timer_id    INTEGER NOT NULL,
    run_timer   INTEGER NOT NULL,
    manual      INTEGER NOT NULL DEFAULT 0,  -- made by triggerTimer (its key ends in _manual)
    attempt     INTEGER NOT NULL,            -- the fire's attempts
    output      TEXT    NOT NULL,            -- the fire's last output
    sends       INTEGER NOT NULL DEFAULT 0,  -- sends tried so far, by any node
    owner       TEXT,                        -- the sender holding it
    send_at     INTEGER NOT NULL,            -- its sender's lease ends (or its next send is due): anyone's from then
    create_time INTEGER NOT NULL,
    PRIMARY KEY (task_id, kind)
);

-- The sweep takes the ones whose lease lapsed, oldest first.
CREATE INDEX IF NOT EXISTS idx_notify_send_at ON t_notify_owed (send_at);
