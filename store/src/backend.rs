//! The backend behind a [`Database`]: connecting the one a URL names, and
//! what runs on one backend only (SQLite's WAL checkpointer). The types
//! every repository and backend share are in [`crate::db`], which names no
//! backend.

use xtimer_core::config::DatabaseConfig;

use crate::db::Database;
use crate::{mysql, postgres, redact, sqlite, Error, Result};

impl Database {
    /// Connects the database `config.url` names (`sqlite://PATH`,
    /// `postgres://...` or `mysql://...`) and applies its schema.
    pub async fn connect(config: &DatabaseConfig) -> Result<Self> {
        let url = config.url.as_str();
        if url.starts_with("sqlite:") {
            sqlite::connect(config).await
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            postgres::connect(config, None).await
        } else if url.starts_with("mysql:") || url.starts_with("mariadb:") {
            mysql::connect(config, None).await
        } else {
            Err(Error::UnsupportedUrl(redact(url)))
        }
    }

    /// The WAL checkpointer a node runs on SQLite; none on the servers.
    pub fn checkpointer(&self, period: std::time::Duration) -> Option<sqlite::Checkpointer> {
        match self {
            Self::Sqlite { read, .. } => Some(sqlite::Checkpointer::new(read.clone(), period)),
            Self::Postgres(_) | Self::Mysql(_) => None,
        }
    }
}
