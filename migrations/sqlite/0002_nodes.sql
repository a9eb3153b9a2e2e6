-- Nodes of the cluster, as they report themselves.
CREATE TABLE IF NOT EXISTS t_node (
    node_id      TEXT    PRIMARY KEY,
    host         TEXT    NOT NULL,
    listen       TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    shards       TEXT    NOT NULL DEFAULT '[]'   -- JSON list of held shards
);
