-- Flow control (API 1g): a flow's limits as `setFlowLimit` sets them, by
-- app and flow key (`notifyHTTPParam.flowKey`, at most 128 chars). NULL
-- rate or parallelism: none; `paused` 0 or 1. A set replaces the row.
-- Mirrors migrations/sqlite/0017.
CREATE TABLE IF NOT EXISTS t_flow_limit (
    app          TEXT             NOT NULL,
    flow_key     VARCHAR(128)     NOT NULL,
    rate_per_sec DOUBLE PRECISION,           -- callbacks per second across the cluster
    parallelism  BIGINT,                     -- callbacks open at once across the cluster (any u32)
    paused       SMALLINT         NOT NULL DEFAULT 0,
    modify_time  BIGINT           NOT NULL,  -- Unix ms of the last set
    PRIMARY KEY (app, flow_key)
);
