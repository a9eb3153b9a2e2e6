-- What each app uses, kept as its timers change, so that the create-time
-- limits (timers per app, fires per minute per app) are checked without
-- reading the app's timers. Mirrors migrations/postgres/0008.
-- A cron timer's peak fires in a minute; NULL until first computed.
ALTER TABLE t_timer ADD COLUMN peak_fpm BIGINT;
-- Per app: timers that are not deleted, and the sum of its enabled cron
-- timers' peaks. An app without a row is counted from t_timer when first
-- needed.
CREATE TABLE IF NOT EXISTS t_app_usage (
    app      VARCHAR(128) NOT NULL PRIMARY KEY,
    timers   BIGINT       NOT NULL,
    cron_fpm BIGINT       NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
-- Per app and Unix minute: its enabled one-shot timers due in that minute.
-- Past minutes are deleted by retention.
CREATE TABLE IF NOT EXISTS t_app_minute (
    app    VARCHAR(128) NOT NULL,
    minute BIGINT       NOT NULL,
    fires  BIGINT       NOT NULL,
    PRIMARY KEY (app, minute)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
