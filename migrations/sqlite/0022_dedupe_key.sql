-- One-shots by key (`dedupeKey`): the key a one-shot was created with and
-- the run time its first create asked for (a replace's `maxDelayMs`
-- counts from it). A key is held by at most one live timer of the app:
-- the index covers disabled and enabled timers only, so the status write
-- that completes or deletes the holder frees its key in the same
-- transaction, on every path that ends a timer. Mirrors the other
-- dialects' dedupe_key migration.
ALTER TABLE t_timer ADD COLUMN dedupe_key TEXT;
ALTER TABLE t_timer ADD COLUMN dedupe_first_run INTEGER;
CREATE UNIQUE INDEX IF NOT EXISTS uk_timer_app_dedupe ON t_timer (app, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN (1, 2);
