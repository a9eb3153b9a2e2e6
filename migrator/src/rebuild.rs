//! The shard index rebuilt from the database when it lost writes.
//!
//! The migrator re-indexes its window every step, so an index that lost
//! data heals within a step anyway; until then, the fires only the lost
//! part held go out seconds late, through the reconciler. Redis loses
//! writes when it is flushed, restarts without persistence, or fails over
//! to a replica that had not received the last ones (replication is
//! asynchronous). [`IndexRebuild`] notices within a check period and
//! rebuilds at once, so those fires go out on time.
//!
//! # How a loss is noticed
//!
//! Every node checks the index's marker ([`IndexMarks`]) every
//! [`CHECK_PERIOD_MS`]: the epoch written by the last rebuild, and a
//! counter of the node's own checks kept in the index.
//!
//! - The epoch is gone: the index lost everything (a flush, a restart
//!   empty; or a new cluster, whose first rebuild costs one step's reads).
//! - The epoch is the one this node knew, and its counter did not grow
//!   past the count this node last read: the index went back to an older
//!   state, losing this node's last check and whatever was written just
//!   before it. Each node checks once a period, so a failover that lost
//!   the last period's writes has, with any node checking, lost a check
//!   too. Writes lost that were all made after every node's last check
//!   that reached the replica go unnoticed: those fires go out late
//!   through the reconciler, as before; none is lost.
//! - The epoch changed: another node rebuilt the index after a loss; this
//!   node takes the new epoch and its counter as they are.
//!
//! # Who rebuilds
//!
//! A node that noticed a loss owes a rebuild until it makes one or sees a
//! new epoch (someone else made one after the loss). It makes one only
//! with the turn of the `index-rebuild` pass ([`PassLease`]), so a flush
//! that every node notices costs one rebuild, not one per node; a node
//! that dies mid-rebuild leaves its turn to lapse and the others still
//! owe one. A rebuild adds every pending fire from [`LOOKBACK_MS`] ago to
//! the migrator's horizon (older ones are the reconciler's), publishes them
//! to this node's trigger, and writes a new epoch, at once. The loss took
//! the shards' leases too (a flush takes every key), so a scheduler may
//! take a shard again while its trigger still works the old lease; the
//! trigger's held fires carry their lease's token, so the old lease's end
//! does not drop the fires the new lease (and this rebuild) added.

use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use xtimer_core::node::NodeContext;
use xtimer_core::period::Period;
use xtimer_store::{IndexMark, IndexMarks, PassLease, Stores};

use crate::error::Result;
use crate::expander::Expander;

/// How often each node checks the marker, ms.
pub const CHECK_PERIOD_MS: u64 = 1_000;

/// How far back a rebuild reaches, ms: the fires due since then that are
/// still pending may have been lost with the index; older ones are past
/// the reconciler's grace, so it sends them.
pub const LOOKBACK_MS: i64 = 3_000;

/// How long a rebuild's turn is held, ms: long enough for a rebuild of a
/// busy window, so the others do not make theirs meanwhile.
const TURN_MS: u64 = 10_000;

/// The loop that notices that the shard index lost writes and rebuilds it
/// from the database. One per node, on an index that can lose writes.
pub struct IndexRebuild {
    marks: Arc<dyn IndexMarks>,
    expander: Expander,
    lease: PassLease,
    node_id: String,
    seen: Mutex<Seen>,
}

/// What this node knows of the marker.
#[derive(Debug, Default)]
struct Seen {
    /// The epoch and this node's count at its last check.
    known: Option<(String, i64)>,
    /// A loss noticed and not yet repaired, with the epoch at the time
    /// (`None`: it was gone).
    owed: Option<Option<String>>,
}

/// What one check did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// No loss seen (or another node rebuilt after one).
    Whole,
    /// A loss seen; another node has the turn to rebuild (or this node
    /// could not finish): checked again next period.
    Owed,
    /// This node rebuilt the index: how many fires it added.
    Rebuilt(u64),
}

impl IndexRebuild {
    /// The rebuild loop of `ctx`'s node, adding fires through `expander`;
    /// `None` when the index cannot lose writes (the embedded one).
    pub fn new(stores: &Stores, ctx: &NodeContext, expander: Expander) -> Option<Self> {
        let marks = stores.marks.clone()?;
        Some(Self {
            marks,
            expander,
            lease: PassLease::new(stores.locks.clone(), ctx, "index-rebuild", TURN_MS),
            node_id: ctx.node_id.clone(),
            seen: Mutex::new(Seen::default()),
        })
    }

    /// Checks every [`CHECK_PERIOD_MS`] until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let mut period = Period::ms(CHECK_PERIOD_MS);
        while period.tick(&shutdown).await {
            match self.run_once().await {
                Ok(Check::Rebuilt(fires)) => tracing::info!(fires, "Shard index rebuilt from the database."),
                Ok(_) => {}
                // Redis unreachable: every loop that uses it says so.
                Err(err) => {
                    tracing::debug!(error = %xtimer_core::error::error_chain(&err), "Shard index check failed; retrying.")
                }
            }
        }
        Ok(())
    }

    /// One check, and the rebuild it calls for when this node has the turn.
    pub async fn run_once(&self) -> Result<Check> {
        let mark = self.marks.check(&self.node_id).await?;
        if !self.note(&mark) {
            return Ok(Check::Whole);
        }
        if !self.lease.take().await? {
            return Ok(Check::Owed);
        }
        let x = &self.expander;
        let now = x.clock.now_ms();
        let fires = x.index(now - LOOKBACK_MS, x.horizon(now)).await?;
        // Random, so no two rebuilds write the same epoch.
        let nonce = std::collections::hash_map::RandomState::new().build_hasher().finish();
        let epoch = format!("{}:{now}:{nonce:016x}", self.node_id);
        self.marks.set_epoch(&epoch).await?;
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.known = Some((epoch, mark.seq));
        seen.owed = None;
        Ok(Check::Rebuilt(fires))
    }

    /// Takes in one check's marker; whether a rebuild is owed now.
    fn note(&self, mark: &IndexMark) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let lost = match (&mark.epoch, &seen.known) {
            (None, _) => true,
            (Some(epoch), Some((known, last))) if epoch == known => mark.seq <= *last,
            // First check, or a rebuild by another node: taken as it is.
            (Some(_), _) => false,
        };
        if lost && seen.owed.is_none() {
            if seen.known.is_some() {
                tracing::warn!(
                    epoch = ?mark.epoch,
                    known = ?seen.known,
                    seq = mark.seq,
                    "The shard index lost writes; rebuilding it from the database."
                );
            } else {
                tracing::info!("The shard index has no marker (new, or emptied); indexing it from the database.");
            }
            seen.owed = Some(mark.epoch.clone());
        }
        if let Some(epoch) = &mark.epoch {
            // A new epoch since the loss: another node rebuilt after it.
            if seen.owed.as_ref().is_some_and(|at| at.as_ref() != Some(epoch)) {
                seen.owed = None;
            }
            seen.known = Some((epoch.clone(), mark.seq));
        }
        seen.owed.is_some()
    }
}
