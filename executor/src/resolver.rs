//! The DNS resolver of callbacks: the target policy applied to every
//! address a host name resolves to. Shared by the callback client
//! ([`crate::callback`]) and its plain-HTTP/1.1 pool ([`crate::http1`]).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::dns::Name;
use xtimer_core::target_policy::{Refusal, TargetPolicy};

/// A refused callback target, as the resolver reports it through the client.
#[derive(Debug, thiserror::Error)]
#[error("refused: host `{host}` resolves only to denied addresses: {refusal}")]
pub struct TargetRefused {
    /// The host name.
    pub host: String,
    /// The first refusal.
    pub refusal: Refusal,
}

/// A DNS resolver that drops the addresses the policy refuses, and fails
/// with [`TargetRefused`] when none is left.
#[derive(Debug, Clone)]
pub struct PolicyResolver {
    policy: Arc<TargetPolicy>,
}

impl PolicyResolver {
    /// A resolver applying `policy`.
    pub fn new(policy: Arc<TargetPolicy>) -> Self {
        Self { policy }
    }
}

/// The error type of connectors and resolvers.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Resolving = Pin<Box<dyn Future<Output = Result<std::vec::IntoIter<SocketAddr>, BoxError>> + Send>>;

impl tower_service::Service<Name> for PolicyResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = Resolving;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refusal = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| match policy.check(addr.ip()) {
                    Ok(()) => true,
                    Err(r) => {
                        refusal.get_or_insert(r);
                        false
                    }
                })
                .collect();
            match refusal {
                Some(refusal) if allowed.is_empty() => Err(Box::new(TargetRefused { host, refusal }) as BoxError),
                _ => Ok(allowed.into_iter()),
            }
        })
    }
}
