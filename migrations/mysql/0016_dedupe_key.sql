-- One-shots by key (`dedupeKey`): the key a one-shot was created with and
-- the run time its first create asked for (a replace's `maxDelayMs`
-- counts from it). A key is held by at most one live timer of the app:
-- MySQL has no partial index, so the unique key is on the key while the
-- timer is disabled or enabled (NULLs never collide), and the status
-- write that completes or deletes the holder frees its key in the same
-- transaction, on every path that ends a timer. The plain index serves
-- the lookup of a key's holder. Mirrors the other dialects' dedupe_key
-- migration.
ALTER TABLE t_timer
    ADD COLUMN dedupe_key VARCHAR(128),
    ADD COLUMN dedupe_first_run BIGINT,
    ADD COLUMN live_dedupe_key VARCHAR(128)
        GENERATED ALWAYS AS (CASE WHEN status IN (1, 2) THEN dedupe_key END) STORED,
    ADD UNIQUE KEY uk_timer_app_dedupe (app, live_dedupe_key),
    ADD KEY idx_timer_app_dedupe (app, dedupe_key);
