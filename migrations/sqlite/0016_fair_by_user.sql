-- asyncflow: a task type whose holds take ready tasks round-robin across
-- user_ids, each user's oldest first (1), instead of oldest first (0).
ALTER TABLE t_schedule_cfg ADD COLUMN fair_by_user INTEGER NOT NULL DEFAULT 0;
