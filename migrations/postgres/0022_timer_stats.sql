-- The per-timer figures (getTimer's `stats`) rolled up by the hour, so
-- that a read costs the same at any rate: a row per timer and hour of run
-- time that had fires, with its fires by status, the paced ones
-- (backfilled or replayed) counted apart, and a histogram of the
-- lateness (cost_time, ms) of the others sent, one column per bucket
-- (`le_<upper bound>`, inclusive; `le_inf` past the last). `stale` > 0:
-- the row is not to be trusted (a replay or a backfill changed the
-- hour's fires, or some were under way when it was rolled): the read
-- counts that hour's fires instead, and the roll-up loop rolls it again.
-- `t_timer_stats_rolled.upto_ms`: every hour before it is rolled up.
-- Mirrors the other dialects' timer_stats migration.
CREATE TABLE IF NOT EXISTS t_timer_stats (
    timer_id  BIGINT NOT NULL,
    hour_ms   BIGINT NOT NULL,
    fires     INTEGER NOT NULL DEFAULT 0,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    missed    INTEGER NOT NULL DEFAULT 0,
    paced     INTEGER NOT NULL DEFAULT 0,
    stale     INTEGER NOT NULL DEFAULT 0,
    late_max  BIGINT,
    le_0      INTEGER NOT NULL DEFAULT 0,
    le_1      INTEGER NOT NULL DEFAULT 0,
    le_2      INTEGER NOT NULL DEFAULT 0,
    le_3      INTEGER NOT NULL DEFAULT 0,
    le_5      INTEGER NOT NULL DEFAULT 0,
    le_7      INTEGER NOT NULL DEFAULT 0,
    le_10     INTEGER NOT NULL DEFAULT 0,
    le_15     INTEGER NOT NULL DEFAULT 0,
    le_20     INTEGER NOT NULL DEFAULT 0,
    le_30     INTEGER NOT NULL DEFAULT 0,
    le_50     INTEGER NOT NULL DEFAULT 0,
    le_70     INTEGER NOT NULL DEFAULT 0,
    le_100    INTEGER NOT NULL DEFAULT 0,
    le_150    INTEGER NOT NULL DEFAULT 0,
    le_200    INTEGER NOT NULL DEFAULT 0,
    le_300    INTEGER NOT NULL DEFAULT 0,
    le_500    INTEGER NOT NULL DEFAULT 0,
    le_700    INTEGER NOT NULL DEFAULT 0,
    le_1000   INTEGER NOT NULL DEFAULT 0,
    le_1500   INTEGER NOT NULL DEFAULT 0,
    le_2000   INTEGER NOT NULL DEFAULT 0,
    le_3000   INTEGER NOT NULL DEFAULT 0,
    le_5000   INTEGER NOT NULL DEFAULT 0,
    le_10000  INTEGER NOT NULL DEFAULT 0,
    le_30000  INTEGER NOT NULL DEFAULT 0,
    le_60000  INTEGER NOT NULL DEFAULT 0,
    le_inf    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (timer_id, hour_ms)
);
-- By hour: rolling an hour (its marks made before it), forgetting old ones.
CREATE INDEX IF NOT EXISTS idx_timer_stats_hour ON t_timer_stats (hour_ms, timer_id);
-- The stale rows only, for the roll-up loop.
CREATE INDEX IF NOT EXISTS idx_timer_stats_stale ON t_timer_stats (hour_ms) WHERE stale > 0;

CREATE TABLE IF NOT EXISTS t_timer_stats_rolled (
    id      SMALLINT PRIMARY KEY,
    upto_ms BIGINT NOT NULL
);
INSERT INTO t_timer_stats_rolled (id, upto_ms) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
