-- Operating many timers (API 1f).
-- A timer's labels as JSON (`{"team": "a"}`; NULL: none), and one row per
-- label to find timers by selector: (timer_id, lkey) reads a timer's
-- labels, (app, lkey, lvalue) finds an app's timers with a label.
ALTER TABLE t_timer ADD COLUMN labels TEXT;
CREATE TABLE IF NOT EXISTS t_timer_label (
    timer_id BIGINT       NOT NULL,
    app      VARCHAR(128) NOT NULL,
    lkey     VARCHAR(63)  NOT NULL,
    lvalue   VARCHAR(128) NOT NULL,
    PRIMARY KEY (timer_id, lkey)
);
CREATE INDEX IF NOT EXISTS idx_timer_label_find ON t_timer_label (app, lkey, lvalue, timer_id);
-- An app paused (`pauseApp`): its fires due while paused are recorded
-- skipped; `until_ms` NULL: until `resumeApp`.
CREATE TABLE IF NOT EXISTS t_app_pause (
    app       VARCHAR(128) NOT NULL PRIMARY KEY,
    until_ms  BIGINT,
    reason    TEXT         NOT NULL,
    paused_at BIGINT       NOT NULL
);
-- Every change to a timer (`getTimerHistory`): who did what, the changed
-- fields' old and new values as JSON (`{"status": [2, 1]}`).
CREATE TABLE IF NOT EXISTS t_timer_history (
    history_id BIGSERIAL    PRIMARY KEY,
    timer_id   BIGINT       NOT NULL,
    app        VARCHAR(128) NOT NULL,
    at_ms      BIGINT       NOT NULL,
    action     VARCHAR(32)  NOT NULL,
    by_who     VARCHAR(160) NOT NULL,
    changes    TEXT         NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_timer_history_timer ON t_timer_history (timer_id, history_id);
CREATE INDEX IF NOT EXISTS idx_timer_history_at ON t_timer_history (at_ms);
-- A fire sent again by `replayFires`: 1 once replayed (its callbacks then
-- carry `X-Xtimer-Replay: 1`); its `backfill_at` paces the replay.
ALTER TABLE t_timer_task ADD COLUMN replayed SMALLINT NOT NULL DEFAULT 0;
