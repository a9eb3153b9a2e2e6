//! The in-process implementations of the shard index, the locks and the
//! flow tokens: the embedded default's, and the tests'.

mod flows;
mod locks;
mod shards;

pub use flows::MemoryFlowTokens;
pub use locks::MemoryLocks;
pub use shards::MemoryShards;
