//! The timer a request names, as the service takes it.

use xtimer_service::TimerKey;

use super::input::TimerRef;
use crate::auth::AuthContext;

/// The timer `r` names, as the service takes it: with auth on, the caller
/// proved its app (so another app's timer is a 403, not a 404).
pub(crate) fn timer_key(auth: &AuthContext, r: TimerRef) -> TimerKey {
    TimerKey { id: r.id, app: r.app, proven: auth.enabled(), by: auth.actor() }
}
