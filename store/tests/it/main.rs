//! Store conformance suite.
//!
//! Every test body lives in a module below (`timers`, `fires`, `shards`,
//! `locks`) as `pub async fn name(backend: Backend)`. It sees the stores
//! only as trait objects and drives time only through `now_ms` arguments and
//! the backend's `ManualClock`: no sleeping, no wall clock. The
//! [`conformance_suite!`] macro turns the list of bodies into `#[tokio::test]`s
//! for one backend, each on fresh storage:
//!
//! ```text
//! conformance_suite!(embedded, crate::helpers::embedded);
//! conformance_suite!(postgres_redis, crate::helpers::postgres_redis); // next backend: one line
//! ```
//!
//! Test names read `embedded::fires::claim_is_a_compare_and_set`.

mod backend_mysql;
mod backend_pg;
mod backend_redis;
mod calendars;
mod conflicts;
mod fires;
mod flows;
mod helpers;
mod locks;
mod notify;
mod plans;
mod replays;
mod shards;
mod stats;
mod tasks;
mod timers;

/// Generates one `#[tokio::test]` per conformance body for the backend that
/// `$connect()` (an `async fn() -> Backend`) opens, under `mod $backend`.
///
/// A backend that cannot run a body as written lists it after `ignore`,
/// with the reason; the test is generated `#[ignore = reason]`, so it still
/// shows up (and `--ignored` runs it):
///
/// ```text
/// conformance_suite!(redis, crate::backend_redis::redis, ignore {
///     locks::acquire_is_exclusive_until_the_lease_expires: "why",
/// });
/// ```
macro_rules! conformance_suite {
    ($backend:ident, $connect:path $(, ignore { $($imodule:ident::$itest:ident: $reason:literal),* $(,)? })? $(,)?) => {
        mod $backend {
            conformance_suite!(@ignore [$] $connect; $($($imodule::$itest: $reason,)*)?);
            conformance_suite!(@tests
                timers {
                    created_timer_reads_back_field_for_field,
                    create_timers_is_one_all_or_nothing_batch,
                    get_timers_leaves_out_missing_ids,
                    app_timers_page_by_id_and_count_only_live_timers,
                    status_changes_until_the_timer_is_deleted,
                    names_are_unique_per_app_among_live_timers,
                    enabled_timers_page_by_id,
                    due_timers_follow_the_next_fire_index,
                    a_due_page_reads_every_column_as_stored,
                    next_runs_of_a_page_larger_than_one_batch_are_all_written,
                    due_timers_read_across_the_due_index_windows,
                    a_one_shot_completes_once_its_fire_has_ended,
                    a_dedupe_key_is_held_by_one_live_timer_until_it_completes_or_is_deleted,
                    history_notes_read_back_as_written_in_any_count,
                    the_timer_quota_counts_live_timers_in_and_across_calls,
                    fires_per_minute_sum_cron_peaks_and_each_minutes_one_shots,
                    a_call_over_many_apps_counts_each_app_as_its_own,
                    a_name_taken_within_a_group_refuses_only_the_later_item,
                    update_replaces_the_definition_and_marks_it_for_expansion,
                    a_one_shot_with_delete_after_run_is_deleted_once_its_fire_has_ended,
                    pause_if_failing_counts_the_fires_that_ended_before,
                }
                fires {
                    insert_fires_is_idempotent,
                    delete_ended_before_takes_only_old_ended_fires,
                    listing_windows_split_due_from_upcoming,
                    pending_between_is_a_half_open_window_with_a_timer_filter,
                    claim_is_a_compare_and_set,
                    claim_of_a_repeated_key_claims_it_once,
                    claim_skips_fires_of_disabled_and_deleted_timers,
                    manual_fires_are_marked_and_outlive_a_reschedule,
                    backfilled_fires_wait_for_their_send_time_and_say_so,
                    claim_lease_runs_from_the_run_time,
                    a_dead_nodes_claims_are_taken_over_before_their_lease_ends,
                    record_is_fenced_by_the_claim_owner,
                    confirm_claims_keeps_only_claims_still_owned_and_refreshes_the_heartbeat,
                    the_database_clock_is_read_where_nodes_share_the_database,
                    a_caller_whose_heartbeats_are_not_steady_takes_no_running_fire,
                    retry_record_keeps_running_and_the_first_cost_time,
                    record_applies_results_of_one_fire_in_order,
                    release_gives_back_only_to_the_owner,
                    overdue_finds_late_pending_and_expired_leases_only,
                    reclaim_takes_over_an_expired_lease_and_fences_the_old_owner,
                    reclaim_skips_fires_of_a_timer_no_longer_enabled,
                    mark_missed_touches_only_pending_fires,
                    list_fires_is_newest_first_with_filter_and_total,
                    fire_at_reads_a_fire_by_its_scheduled_time_with_its_owner,
                    outcomes_between_reads_one_timers_range_newest_first,
                }
                replays {
                    a_replayed_fire_is_claimed_whatever_its_timers_status_but_deleted,
                    paced_fires_are_found_a_pass_ahead,
                    earlier_attempts_and_takeovers_are_kept,
                    the_stores_own_status_changes_are_in_the_history,
                    every_status_change_is_noted_by_whoever_made_it_in_its_transaction,
                }
                stats {
                    a_day_of_a_timer_firing_every_second_rolls_up_into_its_figures,
                    paced_fires_are_counted_apart_and_a_change_after_the_roll_up_shows_at_once,
                }
                plans {
                    a_plan_of_the_current_definition_inserts_its_fires_once,
                    a_plan_of_a_replaced_definition_inserts_no_fire,
                    a_plan_of_a_timer_whose_status_changed_inserts_no_fire,
                    a_plan_of_a_replaced_definition_moves_no_next_fire,
                    a_spread_fire_is_placed_once_and_keeps_its_scheduled_time,
                    the_spread_load_counts_each_placement_and_each_pending_fire_once,
                    a_replan_forgets_the_placements_of_the_fires_it_deletes,
                }
                notify {
                    a_notice_is_owed_only_with_a_failed_result_written_under_its_owner,
                    a_notice_is_taken_once_its_lease_lapsed_and_held_by_its_taker,
                    concurrent_takers_take_each_notice_once,
                    a_result_and_notice_whose_output_holds_a_nul_are_written,
                    missed_and_late_notices_are_owed_with_the_results_they_are_for,
                    marking_fires_missed_owes_their_on_missed,
                }
                shards {
                    add_is_idempotent,
                    range_is_half_open_and_ordered_by_run_time,
                    shards_separate_buckets_and_minutes,
                    old_shards_expire,
                    expired_shard_reads_empty_without_further_writes,
                }
                locks {
                    acquire_is_exclusive_until_the_lease_expires,
                    only_the_owner_extends_or_releases,
                    expired_lock_cannot_be_extended_or_released,
                    extend_with_a_long_ttl_is_the_done_marker,
                    locks_on_different_keys_are_independent,
                }
            );
        }
    };
    // Defines `conformance_test!(module, test, #[attr]...)` for one backend:
    // an arm per ignored body, then the general one. `$d` is a literal `$`
    // for the inner macro's own metavariables.
    (@ignore [$d:tt] $connect:path; $($module:ident::$test:ident: $reason:literal,)*) => {
        // Every ignored body must exist.
        $(const _: () = { let _ = crate::$module::$test; };)*
        macro_rules! conformance_test {
            $(
                ($module, $test $d(, #[$d attr:meta])*) => {
                    #[tokio::test]
                    #[ignore = $reason]
                    $d(#[$d attr])*
                    async fn $test() {
                        let backend = $connect().await;
                        crate::$module::$test(backend).await;
                    }
                };
            )*
            ($d module:ident, $d test:ident $d(, #[$d attr:meta])*) => {
                #[tokio::test]
                $d(#[$d attr])*
                async fn $d test() {
                    let backend = $connect().await;
                    crate::$d module::$d test(backend).await;
                }
            };
        }
    };
    (@tests $($module:ident { $($(#[$attr:meta])* $test:ident),* $(,)? })*) => {
        $(
            mod $module {
                $(conformance_test!($module, $test $(, #[$attr])*);)*
            }
        )*
    };
}

conformance_suite!(embedded, crate::helpers::embedded);
conformance_suite!(postgres, crate::backend_pg::postgres);
conformance_suite!(mysql, crate::backend_mysql::mysql);
conformance_suite!(redis, crate::backend_redis::redis, ignore {
    locks::acquire_is_exclusive_until_the_lease_expires: "Redis expires leases on its own clock, not the ManualClock; backend_redis::leases_and_the_done_marker_expire_on_the_server_clock",
    locks::expired_lock_cannot_be_extended_or_released: "Redis expires leases on its own clock, not the ManualClock; backend_redis::expired_lock_cannot_be_extended_or_released",
    locks::extend_with_a_long_ttl_is_the_done_marker: "Redis expires leases on its own clock, not the ManualClock; backend_redis::extend_with_a_long_ttl_is_the_done_marker and leases_and_the_done_marker_expire_on_the_server_clock",
    locks::locks_on_different_keys_are_independent: "Redis expires leases on its own clock, not the ManualClock; backend_redis::locks_on_different_keys_expire_independently",
});

conformance_suite!(redis_cluster, crate::backend_redis::redis_cluster, ignore {
    locks::acquire_is_exclusive_until_the_lease_expires: "Redis expires leases on its own clock, not the ManualClock; backend_redis::leases_and_the_done_marker_expire_on_the_server_clock",
    locks::expired_lock_cannot_be_extended_or_released: "Redis expires leases on its own clock, not the ManualClock; backend_redis::expired_lock_cannot_be_extended_or_released",
    locks::extend_with_a_long_ttl_is_the_done_marker: "Redis expires leases on its own clock, not the ManualClock; backend_redis::extend_with_a_long_ttl_is_the_done_marker and leases_and_the_done_marker_expire_on_the_server_clock",
    locks::locks_on_different_keys_are_independent: "Redis expires leases on its own clock, not the ManualClock; backend_redis::locks_on_different_keys_expire_independently",
});

/// A server that cannot be reached at start is named by its setting and URL
/// (password hidden), with the reason.
#[tokio::test]
async fn an_unreachable_server_at_start_names_its_setting_and_url() {
    use xtimer_core::config::{DatabaseConfig, RedisConfig, ShardConfig};
    let dir = tempfile::tempdir().unwrap();
    let sqlite = DatabaseConfig { url: format!("sqlite://{}", dir.path().join("x.db").display()), max_connections: 2 };
    let clock: xtimer_core::SharedClock = std::sync::Arc::new(xtimer_core::SystemClock);
    let redis = RedisConfig { url: "redis://:hunter2@127.0.0.1:1".into(), ..RedisConfig::default() };
    let err =
        xtimer_store::Stores::connect(&sqlite, &redis, &ShardConfig::default(), clock.clone()).await.err().unwrap();
    let msg = err.to_string();
    assert!(msg.starts_with("cannot connect to redis://:***@127.0.0.1:1 (redis.url): "), "{msg}");
    assert!(!msg.contains("hunter2"), "{msg}");

    let pg = DatabaseConfig { url: "postgres://xtimer:hunter2@127.0.0.1:1/xtimer".into(), max_connections: 2 };
    let err = xtimer_store::Stores::connect(&pg, &RedisConfig::default(), &ShardConfig::default(), clock)
        .await
        .err()
        .unwrap();
    let msg = err.to_string();
    assert!(msg.starts_with("cannot connect to postgres://xtimer:***@127.0.0.1:1/xtimer (database.url): "), "{msg}");
    assert!(!msg.contains("hunter2"), "{msg}");
}
