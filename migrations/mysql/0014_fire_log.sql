-- Every attempt of a fire, and every claim that took a fire over from
-- another node (explainFire's `attempts` and `claims`). The fire row
-- keeps its last attempt; an earlier one is copied here, with the node
-- that made it, before anything overwrites it (a retry's result, a
-- replay, a takeover), so the common fire (one attempt) writes nothing
-- here. Mirrors the other dialects' fire_log migration.
ALTER TABLE t_timer_task ADD COLUMN sent_at BIGINT;

CREATE TABLE IF NOT EXISTS t_fire_attempt (
    task_id     BIGINT       NOT NULL,
    attempt     INT          NOT NULL,
    timer_id    BIGINT       NOT NULL,
    run_timer   BIGINT       NOT NULL,
    owner       VARCHAR(255),
    sent_at     BIGINT,
    answered_at BIGINT       NOT NULL,
    status      TINYINT      NOT NULL,
    output      MEDIUMTEXT   NOT NULL,
    PRIMARY KEY (task_id, attempt),
    KEY idx_fire_attempt_run (run_timer)
);

CREATE TABLE IF NOT EXISTS t_fire_claim (
    claim_id        BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_id         BIGINT       NOT NULL,
    run_timer       BIGINT       NOT NULL,
    owner           VARCHAR(255) NOT NULL,
    taken_over_from VARCHAR(255),
    at_ms           BIGINT       NOT NULL,
    KEY idx_fire_claim_task (task_id),
    KEY idx_fire_claim_run (run_timer)
);

-- Paced fires (backfilled, replayed) by send time, for the reconciler's
-- look a pass ahead: only such fires have one, so the fire path never
-- touches this index.
CREATE INDEX idx_task_paced ON t_timer_task (backfill_at);
