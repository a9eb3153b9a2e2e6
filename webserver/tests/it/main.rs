//! The webserver's one integration-test binary: the router over a real
//! SQLite store and migrator, driven in-process with `oneshot`, and (in
//! `slow_clients`) behind the real accept loop over TCP.

mod auth;
mod batch;
mod create;
mod helpers;
mod lifecycle;
mod limits;
mod lingering_close;
mod listing;
mod newcomer;
mod openapi;
mod refusals;
mod server;
mod slow_clients;
mod validation;
