-- Operating many timers (API 1f).
-- A timer's labels as JSON (`{"team": "a"}`; NULL: none), and one row per
-- label to find timers by selector: (timer_id, lkey) reads a timer's
-- labels, (app, lkey, lvalue) finds an app's timers with a label.
ALTER TABLE t_timer ADD COLUMN labels TEXT;
CREATE TABLE IF NOT EXISTS t_timer_label (
    timer_id INTEGER NOT NULL,
    app      TEXT    NOT NULL,
    lkey     TEXT    NOT NULL,
    lvalue   TEXT    NOT NULL,
    PRIMARY KEY (timer_id, lkey)
);
CREATE INDEX IF NOT EXISTS idx_timer_label_find ON t_timer_label (app, lkey, lvalue, timer_id);
-- An app paused (`pauseApp`): its fires due while paused are recorded
-- skipped; `until_ms` NULL: until `resumeApp`.
CREATE TABLE IF NOT EXISTS t_app_pause (
    app       TEXT    NOT NULL PRIMARY KEY,
    until_ms  INTEGER,
    reason    TEXT    NOT NULL,
    paused_at INTEGER NOT NULL
);
-- Every change to a timer (`getTimerHistory`): who did what, the changed
-- fields' old and new values as JSON (`{"status": [2, 1]}`).
CREATE TABLE IF NOT EXISTS t_timer_history (
    history_id INTEGER PRIMARY KEY AUTOINCREMENT,
    timer_id   INTEGER NOT NULL,
    app        TEXT    NOT NULL,
    at_ms      INTEGER NOT NULL,
    action     TEXT    NOT NULL,
    by_who     TEXT    NOT NULL,
    changes    TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_timer_history_timer ON t_timer_history (timer_id, history_id);
CREATE INDEX IF NOT EXISTS idx_timer_history_at ON t_timer_history (at_ms);
-- A fire sent again by `replayFires`: 1 once replayed (its callbacks then
-- carry `X-Xtimer-Replay: 1`); its `backfill_at` paces the replay.
ALTER TABLE t_timer_task ADD COLUMN replayed INTEGER NOT NULL DEFAULT 0;
