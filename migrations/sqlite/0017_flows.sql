-- Flow control (API 1g): a flow's limits as `setFlowLimit` sets them, by
-- app and flow key (`notifyHTTPParam.flowKey`, at most 128 chars). NULL
-- rate or parallelism: none; `paused` 0 or 1. A set replaces the row.
CREATE TABLE IF NOT EXISTS t_flow_limit (
    app          TEXT    NOT NULL,
    flow_key     TEXT    NOT NULL,
    rate_per_sec REAL,               -- callbacks per second across the cluster
    parallelism  INTEGER,            -- callbacks open at once across the cluster
    paused       INTEGER NOT NULL DEFAULT 0,
    modify_time  INTEGER NOT NULL,   -- Unix ms of the last set
    PRIMARY KEY (app, flow_key)
);
