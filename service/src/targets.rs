//! [`Targets`] as a server enforces them: its callback target policy
//! (`callback.*`) and the task types registered with its task API.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use xtimer_asyncflow::Tasks;
use xtimer_core::config::CallbackConfig;
use xtimer_core::target_policy::TargetPolicy;

use crate::checks::{Targets, TaskTypeError};

/// How long a create waits for a callback host to resolve.
pub const CREATE_RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The checks of a server: where callbacks may point, which task types exist.
pub struct PolicyTargets {
    policy: Arc<TargetPolicy>,
    resolve_at_create: bool,
    tasks: Option<Tasks>,
}

impl PolicyTargets {
    /// The policy `callback` sets, and the task types of `tasks` (none: the
    /// task API is off, and a task notify is refused).
    pub fn new(callback: &CallbackConfig, tasks: Option<Tasks>) -> xtimer_core::Result<Self> {
        Ok(Self { policy: Arc::new(callback.target_policy()?), resolve_at_create: callback.resolve_at_create, tasks })
    }
}

#[async_trait]
impl Targets for PolicyTargets {
    /// Refused when the URL's host is, or resolves to, an address the
    /// target policy refuses (a name is resolved only with
    /// `callback.resolve_at_create`).
    async fn check_callback(&self, url: &str) -> Result<(), String> {
        let Some(host) = host_of(url) else { return Ok(()) };
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if self.resolve_at_create || bare.parse::<std::net::IpAddr>().is_ok() {
            self.policy.check_host(host, CREATE_RESOLVE_TIMEOUT).await.map_err(|refusal| refusal.to_string())
        } else {
            Ok(())
        }
    }

    async fn task_type_owner(&self, task_type: &str) -> Result<Option<String>, TaskTypeError> {
        let tasks = self.tasks.as_ref().ok_or_else(|| TaskTypeError::Refused("the task API is not enabled".into()))?;
        match tasks.owner_of(task_type).await {
            Ok(owner) => Ok(owner),
            Err(err) if err.is_caller_fault() => Err(TaskTypeError::Refused(err.to_string())),
            Err(err) => Err(TaskTypeError::Failed(Box::new(err))),
        }
    }
}

/// The host of an absolute `scheme://` URL (an IPv6 address keeps its
/// brackets), without user info or port; `None` when it has none.
fn host_of(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = match authority.find(']') {
        Some(end) if authority.starts_with('[') => &authority[..=end],
        _ => authority.split(':').next()?,
    };
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_its_host() {
        assert_eq!(host_of("http://example.com:8080/a?b#c"), Some("example.com"));
        assert_eq!(host_of("https://user:pw@10.0.0.1/x"), Some("10.0.0.1"));
        assert_eq!(host_of("http://[fe80::1%25eth0]:80/"), Some("[fe80::1%25eth0]"));
        assert_eq!(host_of("http://[::1]"), Some("[::1]"));
        assert_eq!(host_of("http:///path"), None);
        assert_eq!(host_of("no scheme"), None);
    }

    #[tokio::test]
    async fn the_policy_refuses_metadata_addresses_and_task_types_need_the_task_api() {
        let targets = PolicyTargets::new(&CallbackConfig::default(), None).unwrap();
        assert!(targets.check_callback("http://169.254.169.254/latest").await.is_err());
        assert!(targets.check_callback("http://example.invalid/hook").await.is_ok(), "names resolve only when asked");
        assert!(matches!(targets.task_type_owner("mail").await, Err(TaskTypeError::Refused(_))));
    }
}
