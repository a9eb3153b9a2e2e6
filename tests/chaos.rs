//! The chaos run (`cluster/chaos.rs`), built as a test binary of its own:
//! cargo runs test binaries one after another, so the run never shares
//! the machine with the other cluster tests, and they never share it with
//! the run's load and outages.

#[path = "cluster/chaos.rs"]
mod chaos;
#[path = "cluster/failover.rs"]
mod failover;
#[path = "cluster/ha_servers.rs"]
mod ha_servers;
#[allow(dead_code)]
#[path = "cluster/nodes.rs"]
mod nodes;
#[path = "cluster/proxy.rs"]
mod proxy;
#[allow(dead_code)]
#[path = "cluster/servers.rs"]
mod servers;
