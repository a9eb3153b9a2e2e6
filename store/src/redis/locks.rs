//! Leased locks in Redis: `SET NX PX` with an owner token, extended and
//! released by scripts that check the token.

use async_trait::async_trait;

use super::RedisStore;
use crate::{LockStore, Result};

#[async_trait]
impl LockStore for RedisStore {
    async fn acquire(&self, key: &str, token: &str, ttl_ms: u64) -> Result<bool> {
        // `PX 0` is an error in Redis; a 1 ms lease is as good as none.
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms.max(1))
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(set.is_some())
    }

    async fn extend(&self, key: &str, token: &str, ttl_ms: u64) -> Result<bool> {
        let extended: i64 =
            self.scripts.extend.key(key).arg(token).arg(ttl_ms.max(1)).invoke_async(&mut self.conn.clone()).await?;
        Ok(extended == 1)
    }

    async fn release(&self, key: &str, token: &str) -> Result<bool> {
        let released: i64 = self.scripts.release.key(key).arg(token).invoke_async(&mut self.conn.clone()).await?;
        Ok(released == 1)
    }
}
