//! The SDK against a fake flowSvr on 127.0.0.1 that records what it is
//! sent: request shapes, and the worker loop's backlog, panics and shutdown.

mod client;
mod helpers;
mod worker;
