-- Spread fires are placed by the load of every placement recorded, read
-- by send time (store/src/placement.rs, spread_load): two planners see
-- each other's choices before the fire rows follow. Mirrors the other
-- dialects' placement_load migration.
CREATE INDEX IF NOT EXISTS idx_placement_run ON t_fire_placement (run_timer);
