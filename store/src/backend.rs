//! The backend behind a [`Database`]: connecting the one a URL names, its
//! driver ([`on_driver!`]: the one place a repository meets the backend it
//! runs on), and what runs on one backend only (SQLite's WAL
//! checkpointer). The types every repository and backend share are in
//! [`crate::db`], which names no backend.

use xtimer_core::config::DatabaseConfig;

use crate::db::Database;
use crate::driver::Statements;
use crate::{mysql, postgres, redact, sqlite, Error, Result};

/// Runs `$body` with `$d` bound to the [`Driver`](crate::driver::Driver)
/// of a [`Database`]'s backend (`sqlite::driver::SqliteDriver`, ...). The
/// body is compiled once per backend: each call reaches its backend's own
/// code directly.
macro_rules! on_driver {
    ($db:expr, $d:ident => $body:expr) => {
        match $db {
            $crate::Database::Sqlite { write, read } => {
                let $d = $crate::sqlite::driver::SqliteDriver { write, read };
                $body
            }
            $crate::Database::Postgres(pool) => {
                let $d = $crate::postgres::driver::PgDriver(pool);
                $body
            }
            $crate::Database::Mysql(pool) => {
                let $d = $crate::mysql::driver::MysqlDriver(pool);
                $body
            }
        }
    };
}
pub(crate) use on_driver;

impl Database {
    /// The texts of the statements that differ, as this backend writes them.
    pub(crate) fn statements(&self) -> &'static Statements {
        match self {
            Self::Sqlite { .. } => &sqlite::driver::STATEMENTS,
            Self::Postgres(_) => &postgres::driver::STATEMENTS,
            Self::Mysql(_) => &mysql::driver::STATEMENTS,
        }
    }

    /// The backend and its `url` (password hidden), for the start-up log.
    pub(crate) fn describe(&self, url: &str) -> String {
        match self {
            Self::Sqlite { .. } => format!("SQLite at {url}"),
            Self::Postgres(_) => format!("PostgreSQL at {}", redact(url)),
            Self::Mysql(_) => format!("MySQL at {}", redact(url)),
        }
    }

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
