//! Rust SDK for asyncflow workers (in progress).
