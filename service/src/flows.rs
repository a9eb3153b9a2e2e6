//! Flow control per key (API 1g): `setFlowLimit`, `getFlows` and
//! `delFlowLimit`. The limits are stored; every node's executor reads them
//! within a second and holds its fires to them (`xtimer_executor::flows`).

use xtimer_store::{FlowFigures, FlowLimit};

use crate::checks;
use crate::error::Result;
use crate::error::ServiceError;
use crate::timer_service::TimerService;

/// Highest `ratePerSec`.
pub const MAX_RATE_PER_SEC: f64 = 100_000.0;

/// Highest `parallelism`.
pub const MAX_PARALLELISM: u32 = 100_000;

/// What `setFlowLimit` asks: each field given replaces the flow's (a
/// `Some(None)` rate or parallelism removes it); those not given keep
/// theirs (none, for a new flow).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowChange {
    /// Callbacks per second across the cluster.
    pub rate_per_sec: Option<Option<f64>>,
    /// Callbacks open at once across the cluster.
    pub parallelism: Option<Option<i64>>,
    /// Whether its fires are held.
    pub paused: Option<bool>,
}

/// A flow as `getFlows` shows it: its limits and its figures now.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    /// Its limits.
    pub limit: FlowLimit,
    /// Its fires waiting and callbacks open, across the cluster.
    pub figures: FlowFigures,
}

impl TimerService {
    /// Sets `app`'s flow `key`'s limits as `change` says; the flow as it is now.
    pub async fn set_flow_limit(&self, app: &str, key: &str, change: FlowChange) -> Result<Flow> {
        checks::check_app(app)?;
        check_key(key)?;
        if let Some(Some(rate)) = change.rate_per_sec {
            if !(rate > 0.0 && rate <= MAX_RATE_PER_SEC) {
                return Err(ServiceError::invalid(
                    "ratePerSec",
                    format!("must be above 0 and at most {MAX_RATE_PER_SEC}"),
                ));
            }
        }
        if let Some(Some(n)) = change.parallelism {
            if !(1..=i64::from(MAX_PARALLELISM)).contains(&n) {
                return Err(ServiceError::invalid("parallelism", format!("must be 1 to {MAX_PARALLELISM}")));
            }
        }
        let now = self.0.clock.now_ms();
        let old = self.0.flows.flow_limits(Some(app)).await?.into_iter().find(|f| f.key == key);
        let old = old.unwrap_or(FlowLimit {
            app: app.to_owned(),
            key: key.to_owned(),
            rate_per_sec: None,
            parallelism: None,
            paused: false,
            modify_time: now,
        });
        let limit = FlowLimit {
            rate_per_sec: change.rate_per_sec.unwrap_or(old.rate_per_sec),
            parallelism: change.parallelism.map(|p| p.map(|n| n as u32)).unwrap_or(old.parallelism),
            paused: change.paused.unwrap_or(old.paused),
            modify_time: now,
            ..old
        };
        self.0.flows.set_flow_limit(&limit).await?;
        let figures = self.0.flow_tokens.figures(app, key).await?;
        Ok(Flow { limit, figures })
    }

    /// `app`'s flows with limits, by key, with their figures.
    pub async fn flows(&self, app: &str) -> Result<Vec<Flow>> {
        checks::check_app(app)?;
        let limits = self.0.flows.flow_limits(Some(app)).await?;
        let mut flows = Vec::with_capacity(limits.len());
        for limit in limits {
            let figures = self.0.flow_tokens.figures(app, &limit.key).await?;
            flows.push(Flow { limit, figures });
        }
        Ok(flows)
    }

    /// Removes the limits of `app`'s flow `key`: its waiting fires go.
    /// Whether it had any.
    pub async fn delete_flow_limit(&self, app: &str, key: &str) -> Result<bool> {
        checks::check_app(app)?;
        check_key(key)?;
        let had = self.0.flows.delete_flow_limit(app, key).await?;
        self.0.flow_tokens.forget(app, key).await?;
        Ok(had)
    }
}

/// A flow key: 1 to [`MAX_FLOW_KEY_CHARS`](xtimer_core::timer::MAX_FLOW_KEY_CHARS) chars, no control characters.
pub fn check_key(key: &str) -> Result<()> {
    check_flow_key("key", key)
}

/// [`check_key`] for a field named `field` (a callback's flow key).
pub fn check_flow_key(field: &str, key: &str) -> Result<()> {
    xtimer_core::timer::check_flow_key(key).map_err(|problem| ServiceError::invalid(field, problem))
}
