-- Per-app API tokens and callback signing secrets.

-- Tokens issued by the admin endpoint, stored as the hex SHA-256 of the
-- token (the token itself is shown once, when issued).
CREATE TABLE IF NOT EXISTS t_api_token (
    token_hash  TEXT    PRIMARY KEY,
    app         TEXT    NOT NULL,
    create_time INTEGER NOT NULL   -- Unix ms
);
CREATE INDEX IF NOT EXISTS idx_api_token_app ON t_api_token (app);

-- The key each app's callbacks are signed with; the row of app '' (never
-- a valid app) is the server-wide default.
CREATE TABLE IF NOT EXISTS t_app_secret (
    app         TEXT    PRIMARY KEY,
    secret      TEXT    NOT NULL,
    create_time INTEGER NOT NULL   -- Unix ms
);
