//! Explicit limits: API requests per second per app (a token bucket per
//! key, [`RateLimiter`], taken from by `layers::rate_limit`). The timers per app and fires per minute per app
//! are counters the store keeps and checks as timers change
//! (`xtimer_store::usage`); the other limits (body size, callback headers
//! and body, name and app lengths) are checked where the input is read;
//! every one answers an envelope naming the limit and its configuration key.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request};
use dashmap::DashMap;
use xtimer_core::SharedClock;

use crate::auth::AuthContext;

/// Keys kept before idle buckets are dropped.
const MAX_BUCKETS: usize = 100_000;

/// Token buckets, one per key (app, or caller address), refilled on the
/// injected clock.
pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: DashMap<String, Bucket>,
    calls: AtomicU64,
    clock: SharedClock,
}

struct Bucket {
    tokens: f64,
    /// When it was last taken from, Unix ms.
    at_ms: i64,
}

impl RateLimiter {
    /// `per_second` requests per second with bursts of `burst` on `clock`;
    /// 0 turns it off.
    pub fn new(per_second: u32, burst: u32, clock: SharedClock) -> Self {
        Self {
            per_second: f64::from(per_second),
            burst: f64::from(burst.max(1)),
            buckets: DashMap::new(),
            calls: AtomicU64::new(0),
            clock,
        }
    }

    /// Takes one request from `key`'s bucket; when it is empty, how long
    /// until it holds one again.
    pub fn take(&self, key: &str) -> Result<(), Duration> {
        if self.per_second <= 0.0 {
            return Ok(());
        }
        let now_ms = self.clock.now_ms();
        if self.calls.fetch_add(1, Ordering::Relaxed).is_multiple_of(4096) && self.buckets.len() > MAX_BUCKETS {
            // A full bucket is the same as none: drop those, keeping memory
            // bounded whatever keys callers make up.
            let refill_ms = (self.burst / self.per_second * 1_000.0).ceil() as i64;
            self.buckets.retain(|_, b| now_ms - b.at_ms < refill_ms);
        }
        let mut bucket = self.buckets.entry(key.to_string()).or_insert(Bucket { tokens: self.burst, at_ms: now_ms });
        // A clock set back refills nothing.
        let elapsed = (now_ms - bucket.at_ms).max(0) as f64 / 1_000.0;
        bucket.tokens = (bucket.tokens + elapsed * self.per_second).min(self.burst);
        bucket.at_ms = bucket.at_ms.max(now_ms);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / self.per_second))
        }
    }
}

/// Whose bucket `request` takes from: the app of the caller's token, else
/// the `app` of the query string, else the caller's address.
pub fn rate_key(request: &Request) -> String {
    if let Some(app) = request.extensions().get::<AuthContext>().and_then(AuthContext::app) {
        return format!("app `{app}`");
    }
    let query_app = request.uri().query().and_then(|q| {
        q.split('&').find_map(|pair| pair.strip_prefix("app=").map(|v| v.chars().take(128).collect::<String>()))
    });
    if let Some(app) = query_app.filter(|a| !a.is_empty()) {
        return format!("app `{app}`");
    }
    match request.extensions().get::<ConnectInfo<SocketAddr>>() {
        Some(ConnectInfo(addr)) => format!("address {}", addr.ip()),
        None => "this caller".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use xtimer_core::clock::ManualClock;

    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refuses_until_it_refills() {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let r = RateLimiter::new(10, 3, clock.clone());
        assert!((0..3).all(|_| r.take("a").is_ok()));
        let near = |wait: Duration, ms: f64| (wait.as_secs_f64() * 1_000.0 - ms).abs() < 1e-6;
        let wait = r.take("a").unwrap_err();
        assert!(near(wait, 100.0), "{wait:?}");
        assert!(r.take("b").is_ok(), "keys have their own buckets");
        clock.advance(60);
        let wait = r.take("a").unwrap_err();
        assert!(near(wait, 40.0), "0.6 of a token: {wait:?}");
        clock.advance(40);
        assert!(r.take("a").is_ok(), "refilled");
        assert!(r.take("a").is_err());
        clock.advance(-5_000);
        assert!(r.take("a").is_err(), "a clock set back refills nothing");
        clock.advance(5_000 + 10_000);
        assert!((0..3).all(|_| r.take("a").is_ok()), "never more than the burst");
        assert!(r.take("a").is_err());
        assert!(RateLimiter::new(0, 0, clock).take("a").is_ok(), "0 is off");
    }
}
