//! The shard index's marker in Redis ([`IndexMarks`]): the string
//! `{prefix}:{index}:epoch`, written by each rebuild and otherwise never
//! (no TTL), and one counter per node, `{prefix}:{index}:seq:<node id>`,
//! incremented at each of its checks and kept [`SEQ_TTL_MS`] past the
//! last. A missing epoch means the index lost everything; a counter that
//! did not grow means the index went back to an older state. The hash tag
//! `{index}` keeps every marker key in one slot of a Redis Cluster, so one
//! check is one transaction.

use async_trait::async_trait;
use redis::AsyncCommands;

use super::RedisStore;
use crate::shard::{IndexMark, IndexMarks};
use crate::Result;

/// How long a node's check counter outlives its last check, ms. A node
/// silent for longer (paused, gone) finds its counter restarted: one
/// rebuild more than needed, never one fewer.
const SEQ_TTL_MS: i64 = 10 * 60_000;

fn epoch_key(prefix: &str) -> String {
    format!("{prefix}:{{index}}:epoch")
}

fn seq_key(prefix: &str, node_id: &str) -> String {
    format!("{prefix}:{{index}}:seq:{node_id}")
}

#[async_trait]
impl IndexMarks for RedisStore {
    async fn check(&self, node_id: &str) -> Result<IndexMark> {
        let seq = seq_key(&self.config.key_prefix, node_id);
        let (epoch, seq): (Option<String>, i64) = redis::pipe()
            .atomic()
            .get(epoch_key(&self.config.key_prefix))
            .incr(&seq, 1)
            .pexpire(&seq, SEQ_TTL_MS)
            .ignore()
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(IndexMark { epoch, seq })
    }

    async fn set_epoch(&self, epoch: &str) -> Result<()> {
        let () = self.conn.clone().set(epoch_key(&self.config.key_prefix), epoch).await?;
        Ok(())
    }
}
