-- Every attempt of a fire, and every claim that took a fire over from
-- another node (explainFire's `attempts` and `claims`). The fire row
-- keeps its last attempt; an earlier one is copied here, with the node
-- that made it, before anything overwrites it (a retry's result, a
-- replay, a takeover), so the common fire (one attempt) writes nothing
-- here. Mirrors the other dialects' fire_log migration.
ALTER TABLE t_timer_task ADD COLUMN sent_at INTEGER;

CREATE TABLE IF NOT EXISTS t_fire_attempt (
    task_id     INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    timer_id    INTEGER NOT NULL,
    run_timer   INTEGER NOT NULL,
    owner       TEXT,
    sent_at     INTEGER,
    answered_at INTEGER NOT NULL,
    status      INTEGER NOT NULL,
    output      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (task_id, attempt)
);
CREATE INDEX IF NOT EXISTS idx_fire_attempt_run ON t_fire_attempt (run_timer);

CREATE TABLE IF NOT EXISTS t_fire_claim (
    claim_id        INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id         INTEGER NOT NULL,
    run_timer       INTEGER NOT NULL,
    owner           TEXT NOT NULL,
    taken_over_from TEXT,
    at_ms           INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_fire_claim_task ON t_fire_claim (task_id);
CREATE INDEX IF NOT EXISTS idx_fire_claim_run ON t_fire_claim (run_timer);

-- Paced fires (backfilled, replayed) by send time, for the reconciler's
-- look a pass ahead: only such fires have one, so the fire path never
-- touches this index.
CREATE INDEX IF NOT EXISTS idx_task_paced ON t_timer_task (backfill_at) WHERE backfill_at IS NOT NULL;
