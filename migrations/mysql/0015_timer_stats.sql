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
    fires     INT NOT NULL DEFAULT 0,
    succeeded INT NOT NULL DEFAULT 0,
    failed    INT NOT NULL DEFAULT 0,
    missed    INT NOT NULL DEFAULT 0,
    paced     INT NOT NULL DEFAULT 0,
    stale     INT NOT NULL DEFAULT 0,
    late_max  BIGINT,
    le_0      INT NOT NULL DEFAULT 0,
    le_1      INT NOT NULL DEFAULT 0,
    le_2      INT NOT NULL DEFAULT 0,
    le_3      INT NOT NULL DEFAULT 0,
    le_5      INT NOT NULL DEFAULT 0,
    le_7      INT NOT NULL DEFAULT 0,
    le_10     INT NOT NULL DEFAULT 0,
    le_15     INT NOT NULL DEFAULT 0,
    le_20     INT NOT NULL DEFAULT 0,
    le_30     INT NOT NULL DEFAULT 0,
    le_50     INT NOT NULL DEFAULT 0,
    le_70     INT NOT NULL DEFAULT 0,
    le_100    INT NOT NULL DEFAULT 0,
    le_150    INT NOT NULL DEFAULT 0,
    le_200    INT NOT NULL DEFAULT 0,
    le_300    INT NOT NULL DEFAULT 0,
    le_500    INT NOT NULL DEFAULT 0,
    le_700    INT NOT NULL DEFAULT 0,
    le_1000   INT NOT NULL DEFAULT 0,
    le_1500   INT NOT NULL DEFAULT 0,
    le_2000   INT NOT NULL DEFAULT 0,
    le_3000   INT NOT NULL DEFAULT 0,
    le_5000   INT NOT NULL DEFAULT 0,
    le_10000  INT NOT NULL DEFAULT 0,
    le_30000  INT NOT NULL DEFAULT 0,
    le_60000  INT NOT NULL DEFAULT 0,
    le_inf    INT NOT NULL DEFAULT 0,
    PRIMARY KEY (timer_id, hour_ms),
    -- By hour: rolling an hour (its marks made before it), forgetting old ones.
    KEY idx_timer_stats_hour (hour_ms, timer_id),
    -- The stale rows, for the roll-up loop.
    KEY idx_timer_stats_stale (stale, hour_ms)
);

CREATE TABLE IF NOT EXISTS t_timer_stats_rolled (
    id      SMALLINT NOT NULL PRIMARY KEY,
    upto_ms BIGINT   NOT NULL
);
INSERT IGNORE INTO t_timer_stats_rolled (id, upto_ms) VALUES (1, 0);
