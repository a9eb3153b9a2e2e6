//! The benchmark's arithmetic: percentiles, medians and peak memory, what
//! the receiver got in a window, and the runs of a scenario with their row
//! of medians.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use xtimer::bench_receiver::{Arrival, BenchReceiver};
use xtimer_core::fire::FireKey;

/// The `q` quantile (0 to 1) of `sorted`, nearest rank; 0 when empty.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[idx]
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The callbacks the receiver got for the fires scheduled in a window.
pub struct Received {
    /// Every callback, repeats included.
    pub hits: Vec<Arrival>,
    /// Callbacks beyond the first of their fire.
    pub duplicates: u64,
    /// The fires that arrived, `(timer_id, run_ms)`, each once.
    pub fires: HashSet<(i64, i64)>,
    /// Every callback's lateness, ms, in order.
    pub late: Vec<f64>,
}

impl Received {
    /// What `receiver` got for the fires scheduled in `[start_ms, end_ms)`.
    pub async fn between(receiver: &BenchReceiver, start_ms: i64, end_ms: i64) -> anyhow::Result<Self> {
        let hits: Vec<Arrival> =
            receiver.arrivals().await?.into_iter().filter(|h| h.run_ms >= start_ms && h.run_ms < end_ms).collect();
        let mut seen: HashMap<&str, u64> = HashMap::new();
        for h in &hits {
            *seen.entry(h.key.as_str()).or_default() += 1;
        }
        let duplicates = seen.values().map(|n| n - 1).sum();
        let fires = seen.keys().filter_map(|k| FireKey::parse_member(k)).map(|k| (k.timer_id, k.run_ms)).collect();
        let mut late: Vec<f64> = hits.iter().map(Arrival::lateness_ms).collect();
        late.sort_by(|a, b| a.total_cmp(b));
        Ok(Self { hits, duplicates, fires, late })
    }
}

/// Runs `once` `runs` times, printing each run's figures with `print`
/// (labelled by the run's number) and, after more than one run, the
/// figures `medians` makes from them (labelled `med`); returns every run's.
pub async fn each_run<F, Fut>(
    runs: usize,
    mut once: impl FnMut() -> Fut,
    print: fn(&str, &F),
    medians: impl FnOnce(&dyn Fn(fn(&F) -> f64) -> f64) -> F,
) -> anyhow::Result<Vec<F>>
where
    Fut: Future<Output = anyhow::Result<F>>,
{
    let mut all = Vec::new();
    for run in 1..=runs {
        let f = once().await?;
        print(&run.to_string(), &f);
        all.push(f);
    }
    if all.len() > 1 {
        let med = |get: fn(&F) -> f64| median(all.iter().map(get).collect());
        print("med", &medians(&med));
    }
    Ok(all)
}

/// Peak resident set size of this process (VmHWM), MB.
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<f64>().ok()))
        .map(|kb| kb / 1024.0)
        .unwrap_or_default()
}
