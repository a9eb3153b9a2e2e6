//! The benchmark's arithmetic: percentiles, medians and peak memory, and
//! the runs of a scenario with their row of medians.

use std::future::Future;

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
