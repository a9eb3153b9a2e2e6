//! The SDK's one error type.

/// What can go wrong talking to the `/v1` API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with a non-zero `code` (API.md section 2 lists
    /// them in [`xtimer_asyncflow::wire::code`]). Go workers treat any
    /// non-zero code as an error, and so do we.
    #[error("{op}: server replied code {code}: {msg}")]
    Api {
        /// The call, e.g. `hold_tasks`.
        op: &'static str,
        /// The reply's `code`.
        code: i32,
        /// The reply's `msg`.
        msg: String,
    },
    /// The request did not get an HTTP reply (connect, timeout, I/O).
    #[error("{op}: request failed")]
    Http {
        /// The call.
        op: &'static str,
        /// What reqwest reported.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with an HTTP status other than 200: not a
    /// flowSvr, or the route is missing.
    #[error("{op}: HTTP status {status}: {body}")]
    Status {
        /// The call.
        op: &'static str,
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The reply was not the JSON the contract promises.
    #[error("{op}: reply could not be decoded")]
    Decode {
        /// The call.
        op: &'static str,
        /// What serde reported.
        #[source]
        source: serde_json::Error,
    },
    /// A successful reply without the field the call returns (e.g. get_task
    /// answered code 0 with `task_data: null`).
    #[error("{op}: reply has no {field}")]
    Missing {
        /// The call.
        op: &'static str,
        /// The absent field.
        field: &'static str,
    },
    /// The server address is not an `http://` or `https://` URL.
    #[error("invalid server address {0:?}")]
    BadAddress(String),
}

impl Error {
    /// The reply's `code` when the server answered with one.
    pub fn code(&self) -> Option<i32> {
        match self {
            Error::Api { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// A result of this crate.
pub type Result<T> = std::result::Result<T, Error>;
