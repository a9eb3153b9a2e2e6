//! Receiving xtimer callbacks: checking that a request really comes from
//! xtimer, and recently, and handling each fire once.
//!
//! Every callback xtimer sends carries these headers:
//!
//! | header | value |
//! |---|---|
//! | `X-Xtimer-Signature` | `t=<unix secs>,v1=<hex>,v2=<hex>`: see [`signature`] (several entries while a secret rotates) |
//! | `X-Xtimer-Timer-Id` | the timer's id |
//! | `X-Xtimer-Run-Time` | when the fire was sent, Unix ms |
//! | `X-Xtimer-Scheduled-Time` | the fire's scheduled time, Unix ms (its identity) |
//! | `X-Xtimer-Attempt` | which attempt this is: 1 first, 2 for the first retry; a replay continues the count |
//! | `Idempotency-Key` | `{timerId}_{scheduledMs}`: the same on every retry and replay of one fire |
//! | `X-Xtimer-Replay` | `1` on a fire sent again by `replayFires` |
//!
//! [`verify`] checks the signature against the raw body, the headers above
//! and the app's signing secret, refuses a `t` more than
//! [`DEFAULT_TOLERANCE`] (300 s) from the receiver's clock (so a captured
//! request cannot be replayed later), and returns the other headers as a
//! [`Callback`]. The signature's `v2` covers `t`, the body and the headers
//! above, so none of them can be altered; `v1` covers `t` and the body
//! only and is checked when a request has no `v2` (an older xtimer). A
//! [`Verifier`] does the same with another tolerance, several secrets
//! (while one is being rotated), or `v2` required.
//!
//! [`begin`] and [`dedupe_with`] handle each fire once, recording its
//! `Idempotency-Key` in a [`SeenKeys`] store ([`MemorySeen`] keeps them in
//! memory, bounded) only once the work **succeeded**: `begin` reserves the
//! key, the handler does its work, then commits the key (done: a later
//! repeat answers **409**, which xtimer records as succeeded and sends no
//! more) or aborts it (failed: the retry does the work again). A repeat
//! arriving while the first is still in flight is answered **503** with
//! `Retry-After`, never 409: the first may yet fail. See the `dedupe`
//! module's docs.
//!
//! With the default `axum` feature, the [`Signed`] extractor reads the body
//! (at most [`Verifier::max_body_bytes`]), verifies it with the
//! [`Verifier`] in the router's state, and answers 401 to a missing, wrong
//! or stale signature; [`Repeat`], the error of `begin` and
//! `dedupe_with`, answers 409 or 503:
//!
//! ```no_run
//! # #[cfg(feature = "axum")]
//! # mod example {
//! use std::sync::Arc;
//!
//! use axum::extract::{FromRef, State};
//! use axum::http::StatusCode;
//! use axum::response::{IntoResponse, Response};
//! use axum::routing::post;
//! use axum::Router;
//! use xtimer_receiver::{dedupe_with, MemorySeen, Signed, Verifier};
//!
//! #[derive(Clone)]
//! struct AppState {
//!     verifier: Verifier,
//!     seen: Arc<MemorySeen>,
//! }
//!
//! // `Signed` finds the `Verifier` in the state; the handler takes the store.
//! impl FromRef<AppState> for Verifier {
//!     fn from_ref(state: &AppState) -> Self {
//!         state.verifier.clone()
//!     }
//! }
//! impl FromRef<AppState> for Arc<MemorySeen> {
//!     fn from_ref(state: &AppState) -> Self {
//!         state.seen.clone()
//!     }
//! }
//!
//! #[derive(serde::Deserialize)]
//! struct Job {
//!     n: u32,
//! }
//!
//! async fn hook(State(seen): State<Arc<MemorySeen>>, signed: Signed) -> Result<&'static str, Response> {
//!     // Only a callback xtimer signed within the last 5 minutes gets here.
//!     // The key is recorded only when the work returns Ok; an Err lets the
//!     // retry do it again. A repeat of a done fire answers 409.
//!     dedupe_with(&seen, &signed, || async {
//!         let job: Job = signed.json().map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()).into_response())?;
//!         println!("timer {} fired for {}: n = {}", signed.callback.timer_id, signed.callback.scheduled_time_ms, job.n);
//!         Ok("done")
//!     })
//!     .await
//! }
//!
//! pub async fn serve() {
//!     let secret = std::env::var("XTIMER_SECRET").expect("the app's signing secret");
//!     let state = AppState { verifier: Verifier::new(secret), seen: Arc::new(MemorySeen::default()) };
//!     let app = Router::new().route("/hook", post(hook)).with_state(state);
//!     let listener = tokio::net::TcpListener::bind("0.0.0.0:3000").await.unwrap();
//!     axum::serve(listener, app).await.unwrap();
//! }
//! # }
//! ```
//!
//! Without the `axum` feature the crate needs only the hashing crates and
//! `http`'s header types.

#[cfg(feature = "axum")]
mod axum_kit;
mod dedupe;
pub mod headers;
pub mod signature;
mod verifier;

#[cfg(feature = "axum")]
pub use axum_kit::{Rejection, Signed};
pub use dedupe::{begin, dedupe_with, Begin, Claim, MemorySeen, Repeat, SeenKeys};
pub use signature::{Accept, VerifyError, Version, DEFAULT_TOLERANCE};
pub use verifier::{verify, Callback, Verifier};
