//! In-process leased locks, for the embedded default and tests.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use xtimer_core::SharedClock;

use crate::lock::LockStore;
use crate::Result;

/// The in-process locks of the embedded default.
#[derive(Debug)]
pub struct MemoryLocks {
    clock: SharedClock,
    /// key -> (token, expires at ms)
    held: Mutex<HashMap<String, (String, i64)>>,
}

impl MemoryLocks {
    /// No locks held.
    pub fn new(clock: SharedClock) -> Self {
        Self { clock, held: Mutex::new(HashMap::new()) }
    }
}

#[async_trait]
impl LockStore for MemoryLocks {
    async fn acquire(&self, key: &str, token: &str, ttl_ms: u64) -> Result<bool> {
        let now = self.clock.now_ms();
        let mut held = self.held.lock().expect("lock table");
        if held.len() > 4096 {
            held.retain(|_, (_, expires)| *expires > now);
        }
        match held.get(key) {
            Some((_, expires)) if *expires > now => Ok(false),
            _ => {
                held.insert(key.to_string(), (token.to_string(), now + ttl_ms as i64));
                Ok(true)
            }
        }
    }

    async fn extend(&self, key: &str, token: &str, ttl_ms: u64) -> Result<bool> {
        let now = self.clock.now_ms();
        let mut held = self.held.lock().expect("lock table");
        match held.get_mut(key) {
            Some((owner, expires)) if owner == token && *expires > now => {
                *expires = now + ttl_ms as i64;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release(&self, key: &str, token: &str) -> Result<bool> {
        let now = self.clock.now_ms();
        let mut held = self.held.lock().expect("lock table");
        match held.get(key) {
            Some((owner, expires)) if owner == token && *expires > now => {
                held.remove(key);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use xtimer_core::clock::ManualClock;

    use super::*;

    #[tokio::test]
    async fn only_the_owner_extends_or_releases_and_leases_expire() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let locks = MemoryLocks::new(clock.clone());
        assert!(locks.acquire("k", "a", 100).await.unwrap());
        assert!(!locks.acquire("k", "b", 100).await.unwrap());
        assert!(!locks.extend("k", "b", 100).await.unwrap());
        assert!(!locks.release("k", "b").await.unwrap());
        assert!(locks.extend("k", "a", 200).await.unwrap());
        clock.advance(150);
        assert!(!locks.acquire("k", "b", 100).await.unwrap(), "extended lease still held");
        clock.advance(100);
        assert!(!locks.extend("k", "a", 100).await.unwrap(), "an expired lease cannot be revived");
        assert!(locks.acquire("k", "b", 100).await.unwrap());
        assert!(locks.release("k", "b").await.unwrap());
        assert!(locks.acquire("k", "a", 100).await.unwrap());
    }
}
