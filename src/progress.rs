//! Progress of long command-line work (the benchmark's wait for its fires,
//! a bulk import): a bar on stderr when it is a terminal, nothing
//! otherwise (logs and pipes stay clean).

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar of `total` steps, labelled `what`.
pub fn bar(what: &str, total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({per_sec}, {eta} left)")
        .expect("the template is valid")
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(what.to_owned());
    bar
}
