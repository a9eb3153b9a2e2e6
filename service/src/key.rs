//! Who asks, and about which timer: the names a use case is called with.

use crate::error::ServiceError;

/// Who asks for a change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Actor {
    /// A caller with a token of this app.
    App(String),
    /// The admin token.
    Admin,
    /// Anyone, with auth off.
    #[default]
    Anonymous,
    /// The timer's receiver, in its answer (`X-Xtimer-Pause`).
    Receiver,
}

impl Actor {
    /// As the history shows it: `app:<name>`, `admin`, `anonymous`, `receiver`.
    pub fn name(&self) -> String {
        match self {
            Self::App(app) => format!("app:{app}"),
            Self::Admin => "admin".into(),
            Self::Anonymous => "anonymous".into(),
            Self::Receiver => "receiver".into(),
        }
    }
}

/// A timer as a caller names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerKey {
    /// The timer's id.
    pub id: i64,
    /// The app the caller says it belongs to.
    pub app: String,
    /// Whether the caller proved it acts for `app` (a token of that app):
    /// another app's timer is then [`ServiceError::Forbidden`] rather than
    /// [`ServiceError::NotFound`].
    pub proven: bool,
    /// Who asks: the timer's history names them.
    pub by: Actor,
}

impl TimerKey {
    /// The one error of a timer that is unknown, deleted or (not proven)
    /// another app's.
    pub(crate) fn not_found(&self) -> ServiceError {
        ServiceError::NotFound { id: self.id, app: self.app.clone() }
    }
}

/// A page of a listing: rows to skip and to return at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Rows skipped.
    pub offset: u64,
    /// Rows returned at most.
    pub limit: u64,
}
