//! MySQL servers that are Galera nodes (MariaDB Galera Cluster, Percona
//! XtraDB Cluster): a node applies the others' committed writes a moment
//! after they commit, so a read on one node may miss a write just
//! committed on another (the reconciler then fired 24 one-second fires
//! 3.3 s late). When the server is a Galera node (`wsrep_on` is ON), every
//! session of the store sets `wsrep_sync_wait = 1`: a read waits until
//! the node has applied every write the cluster committed before it. On a
//! server that is not a Galera node nothing is set.

use sqlx::{Executor, MySqlConnection, Row};

/// The session setting of a Galera node's connections: reads (`SELECT`,
/// `SHOW`, `BEGIN`) see every write committed anywhere before them.
pub(crate) const SYNC_WAIT: &str = "SET SESSION wsrep_sync_wait = 1";

/// Whether the server of `conn` is a Galera node: `wsrep_on` is ON (MySQL
/// 8 has no such variable; MariaDB without a cluster has it OFF).
pub(crate) async fn is_galera(conn: &mut MySqlConnection) -> crate::Result<bool> {
    let row = conn.fetch_optional("SHOW VARIABLES LIKE 'wsrep_on'").await?;
    Ok(match row {
        Some(row) => wsrep_on(&row.try_get_unchecked::<String, _>(1)?),
        None => false,
    })
}

/// Whether a `wsrep_on` value reads as on.
fn wsrep_on(value: &str) -> bool {
    value.eq_ignore_ascii_case("ON") || value == "1"
}

/// On a Galera node, sets [`SYNC_WAIT`] for `conn`'s session.
pub(crate) async fn sync_reads(conn: &mut MySqlConnection, galera: bool) -> sqlx::Result<()> {
    if galera {
        conn.execute(SYNC_WAIT).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wsrep_on_reads_on_only_when_on() {
        assert!(wsrep_on("ON"));
        assert!(wsrep_on("on"));
        assert!(wsrep_on("1"));
        assert!(!wsrep_on("OFF"));
        assert!(!wsrep_on(""));
    }
}
