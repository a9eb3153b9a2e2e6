//! Replaces of one `dedupeKey` under way on this node, so that a burst
//! of them coalesces (see [`crate::dedupe`]); kept apart from it because
//! the service holds one.

use std::collections::HashMap;
use std::sync::Mutex;

/// The replaces of each key under way on this node: the newest one's
/// ticket and how many are under way.
#[derive(Default)]
pub(crate) struct Replaces {
    keys: Mutex<HashMap<(String, String), (u64, usize)>>,
    tickets: std::sync::atomic::AtomicU64,
}

impl Replaces {
    /// A ticket for a replace of `key` of `app`, newer than every other.
    pub(crate) fn enter(&self, app: &str, key: &str) -> u64 {
        let ticket = self.tickets.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let mut keys = self.keys.lock().expect("replaces lock");
        let entry = keys.entry((app.to_owned(), key.to_owned())).or_insert((0, 0));
        *entry = (entry.0.max(ticket), entry.1 + 1);
        ticket
    }

    /// Whether a newer replace of the key than `ticket` is under way.
    pub(crate) fn superseded(&self, app: &str, key: &str, ticket: u64) -> bool {
        let keys = self.keys.lock().expect("replaces lock");
        keys.get(&(app.to_owned(), key.to_owned())).is_some_and(|(newest, _)| *newest > ticket)
    }

    /// A replace of the key ended.
    fn leave(&self, app: &str, key: &str) {
        let mut keys = self.keys.lock().expect("replaces lock");
        let name = (app.to_owned(), key.to_owned());
        if let Some(entry) = keys.get_mut(&name) {
            entry.1 -= 1;
            if entry.1 == 0 {
                keys.remove(&name);
            }
        }
    }
}

/// A replace under way, counted until dropped.
pub(crate) struct Entered<'a> {
    pub(crate) replaces: &'a Replaces,
    pub(crate) app: &'a str,
    pub(crate) key: &'a str,
    pub(crate) ticket: u64,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.replaces.leave(self.app, self.key);
    }
}
