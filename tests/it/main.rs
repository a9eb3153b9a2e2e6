//! End-to-end tests of the xtimer binary's node through real HTTP, with a
//! real callback receiver on 127.0.0.1 and a real SQLite file.

mod adversarial;
mod alerts;
mod apply;
mod asyncflow;
mod bench;
mod cli;
mod cli_words;
mod dedupe;
mod docs;
mod echo;
mod explain;
mod fires;
mod flows;
mod helpers;
mod incidents;
mod lifecycle;
mod logging;
mod metrics;
mod nodes;
mod operating_many;
mod operations;
mod race;
mod receiver_contract;
mod receiver_kit;
mod reliability;
mod replay;
mod restart;
mod saying_when;
mod security;
mod slow_clients;
mod stop;
mod telemetry;
mod ui;
mod worker_sdk;
