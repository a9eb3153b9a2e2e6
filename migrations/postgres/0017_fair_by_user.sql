-- asyncflow: a task type whose holds take ready tasks round-robin across
-- user_ids, each user's oldest first, instead of oldest first.
ALTER TABLE t_schedule_cfg ADD COLUMN fair_by_user BOOLEAN NOT NULL DEFAULT FALSE;
