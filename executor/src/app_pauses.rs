//! Paused apps (`pauseApp`), as the fire path reads them: a snapshot of
//! every app paused now, read again at most once per [`REFRESH_MS`] by
//! whichever fire first finds it old (the others go on with the one they
//! have), so a pause reaches every node within about a second and a fire
//! costs no query.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use xtimer_core::SharedClock;
use xtimer_store::{AppPause, AppRepo};

/// How old the snapshot may get, ms.
pub const REFRESH_MS: i64 = 1_000;

/// How old a snapshot that would skip a fire may be, ms.
pub const CONFIRM_MS: i64 = 100;

/// The apps paused now, as last read.
pub(crate) struct AppPauses {
    apps: Arc<dyn AppRepo>,
    clock: SharedClock,
    /// The pauses and when they were read (`i64::MIN`: never).
    snapshot: RwLock<(i64, Arc<[AppPause]>)>,
    refreshing: AtomicBool,
}

impl AppPauses {
    pub(crate) fn new(apps: Arc<dyn AppRepo>, clock: SharedClock) -> Self {
        Self { apps, clock, snapshot: RwLock::new((i64::MIN, Arc::from([]))), refreshing: AtomicBool::new(false) }
    }

    /// Why a fire of `app` due at `run_ms` is not sent: the app's pause
    /// reason, when the app is paused now and the pause lasts past `run_ms`.
    /// A pause the snapshot shows is read again first when the snapshot
    /// is over [`CONFIRM_MS`] old, so a fire sent just after `resumeApp`
    /// (a replay, typically) is not skipped on a stale read.
    pub(crate) async fn reason(&self, app: &str, run_ms: i64) -> Option<String> {
        let now = self.clock.now_ms();
        let (read_at, pauses) = self.snapshot.read().expect("app pauses").clone();
        let age = now.saturating_sub(read_at);
        let paused = |pauses: &[AppPause]| {
            pauses
                .iter()
                .find(|p| p.app == app && p.until_ms.is_none_or(|until| until > run_ms && until > now))
                .map(|p| p.reason.clone())
        };
        let stale = age >= REFRESH_MS || (age >= CONFIRM_MS && paused(&pauses).is_some());
        let pauses = if stale && !self.refreshing.swap(true, Ordering::AcqRel) {
            let fresh = self.refresh(now).await.unwrap_or(pauses);
            self.refreshing.store(false, Ordering::Release);
            fresh
        } else {
            pauses
        };
        paused(&pauses)
    }

    async fn refresh(&self, now: i64) -> Option<Arc<[AppPause]>> {
        match self.apps.paused_apps(now).await {
            Ok(list) => {
                let list: Arc<[AppPause]> = list.into();
                *self.snapshot.write().expect("app pauses") = (now, list.clone());
                Some(list)
            }
            Err(err) => {
                tracing::warn!(error = %xtimer_core::error::error_chain(&err), "Reading paused apps failed; using the last read.");
                None
            }
        }
    }
}
