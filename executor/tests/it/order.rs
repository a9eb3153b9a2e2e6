//! One timer's late fires reach the receiver oldest first, however many
//! pages the reconciler reads them in.

use xtimer_core::config::ReconcilerConfig;
use xtimer_core::fire::FireStatus;
use xtimer_core::timer::{MisfirePolicy, TimerStatus};

use crate::helpers::{reconciler_config, Harness};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_fires_of_one_timer_leave_oldest_first_across_pages() {
    let config = ReconcilerConfig { page_size: 2, ..reconciler_config() };
    let h = Harness::start(config).await;
    let t = h.timer("paged", TimerStatus::Enabled, MisfirePolicy::FireAll).await;
    // Five pages' worth, read newest first two at a time.
    let keys = h.fires(&t, &[-50_000, -45_000, -40_000, -35_000, -30_000, -25_000, -20_000, -15_000, -10_000]).await;

    let pass = h.reconciler.run_once().await.unwrap();
    assert_eq!(pass.fired, 9, "{pass:?}");
    h.receiver.wait_for(&keys).await;
    h.wait_for_status(&keys, FireStatus::Succeeded).await;
    let expected: Vec<String> = keys.iter().map(ToString::to_string).collect();
    assert_eq!(h.receiver.arrivals(), expected, "oldest first across every page");
}
