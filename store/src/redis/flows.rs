//! The flows' shared limits in Redis: each flow's state, slots and waiting
//! nodes under one hash tag, taken and read by scripts.

use async_trait::async_trait;
use redis::AsyncCommands;

use super::RedisStore;
use crate::flow_tokens::{interval_us, FlowFigures, FlowGrant, FlowTokens, FlowTurn, NODE_TTL_MS};
use crate::Result;

impl RedisStore {
    /// The keys of a flow's state, slots and nodes. The hash tag is a hash
    /// of the app and key (either may hold a brace), so the three share a
    /// cluster slot; the names keep the app and key, so flows never share
    /// keys.
    fn flow_keys(&self, app: &str, key: &str) -> [String; 3] {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in app.bytes().chain([0]).chain(key.bytes()) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        let base = format!("{}:flow:{{{hash:016x}}}:{}:{}", self.config.key_prefix, app.len(), app);
        [format!("{base}:{key}:state"), format!("{base}:{key}:slots"), format!("{base}:{key}:nodes")]
    }
}

#[async_trait]
impl FlowTokens for RedisStore {
    async fn take(&self, turn: &FlowTurn<'_>) -> Result<FlowGrant> {
        let [state, slots, nodes] = self.flow_keys(turn.app, turn.key);
        let mut call = self.scripts.flow_take.prepare_invoke();
        call.key(state).key(slots).key(nodes);
        call.arg(turn.node)
            .arg(turn.head_ms.unwrap_or(-1))
            .arg(turn.waiting)
            .arg(turn.rate_per_sec.map(interval_us).unwrap_or(0))
            .arg(turn.burst)
            .arg(turn.parallelism.unwrap_or(0))
            .arg(u8::from(turn.paused))
            .arg(turn.slot_ttl_ms)
            .arg(NODE_TTL_MS)
            .arg(turn.holding)
            .arg(turn.done.len());
        for slot in turn.done.iter().chain(turn.slots) {
            call.arg(slot);
        }
        let (granted, retry, behind): (i64, i64, i64) = call.invoke_async(&mut self.conn.clone()).await?;
        Ok(FlowGrant { granted: granted.max(0) as usize, retry_in_ms: u64::try_from(retry).ok(), behind: behind == 1 })
    }

    async fn figures(&self, app: &str, key: &str) -> Result<FlowFigures> {
        let [_, slots, nodes] = self.flow_keys(app, key);
        let (waiting, in_flight): (u64, u64) =
            self.scripts.flow_figures.key(slots).key(nodes).invoke_async(&mut self.conn.clone()).await?;
        Ok(FlowFigures { waiting, in_flight })
    }

    async fn forget(&self, app: &str, key: &str) -> Result<()> {
        let [state, _, _] = self.flow_keys(app, key);
        // The slots and nodes lapse by themselves (the nodes' reports keep
        // the flow's order while its waiting fires drain); a new limit
        // starts with a fresh bucket.
        let _: i64 = self.conn.clone().del(state).await?;
        Ok(())
    }
}
