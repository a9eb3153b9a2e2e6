//! API tokens and callback signing secrets (`t_api_token`, `t_app_secret`),
//! over any SQL dialect.
//!
//! Tokens are stored as their SHA-256 only; signing secrets are stored as
//! they are, since signing needs them. The server-wide default secret is
//! the row of app `""`, which no app can be named.

use async_trait::async_trait;

use crate::db::on_db;
use crate::driver::Dialect;
use crate::sql::text;
use crate::{Database, Result};

/// App of the server-wide default signing secret.
pub const SERVER_SECRET_APP: &str = "";

/// What authentication asks of SQL.
#[async_trait]
pub trait AuthRepo: Send + Sync {
    /// Stores a token (by hash) for `app`, and gives the app `new_secret`
    /// as its signing secret unless it has one; returns the app's secret.
    async fn issue_token(&self, app: &str, token_hash: &str, new_secret: &str, now_ms: i64) -> Result<String>;
    /// The app of a token, by hash.
    async fn token_app(&self, token_hash: &str) -> Result<Option<String>>;
    /// The signing secret of `app`, if it has one.
    async fn app_secret(&self, app: &str) -> Result<Option<String>>;
    /// The signing secret of `app`, set to `candidate` first if it has
    /// none; concurrent callers (other nodes) all get the one that won.
    async fn ensure_secret(&self, app: &str, candidate: &str, now_ms: i64) -> Result<String>;
}

const SELECT_SECRET: &str = "SELECT secret FROM t_app_secret WHERE app = $1";

#[async_trait]
impl AuthRepo for Database {
    async fn issue_token(&self, app: &str, token_hash: &str, new_secret: &str, now_ms: i64) -> Result<String> {
        on_db!(self, write, pool => {
            let mut tx = pool.begin().await?;
            sqlx::query(&pool.sql("INSERT INTO t_api_token (token_hash, app, create_time) VALUES ($1, $2, $3)"))
                .bind(token_hash)
                .bind(app)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            sqlx::query(&pool.sql(self.statements().insert_secret)).bind(app).bind(new_secret).bind(now_ms).execute(&mut *tx).await?;
            let secret = text(&sqlx::query(&pool.sql(SELECT_SECRET)).bind(app).fetch_one(&mut *tx).await?, "secret")?;
            tx.commit().await?;
            Ok(secret)
        })
    }

    async fn token_app(&self, token_hash: &str) -> Result<Option<String>> {
        on_db!(self, read, pool => sqlx::query(&pool.sql("SELECT app FROM t_api_token WHERE token_hash = $1"))
            .bind(token_hash)
            .fetch_optional(pool)
            .await?
            .as_ref()
            .map(|row| text(row, "app"))
            .transpose())
    }

    async fn app_secret(&self, app: &str) -> Result<Option<String>> {
        Ok(on_db!(self, read, pool => sqlx::query(&pool.sql(SELECT_SECRET)).bind(app).fetch_optional(pool).await?
            .as_ref().map(|row| text(row, "secret")).transpose()?))
    }

    async fn ensure_secret(&self, app: &str, candidate: &str, now_ms: i64) -> Result<String> {
        // Read back through the writer: SQLite's read pool may not see the row yet.
        on_db!(self, write, pool => {
            sqlx::query(&pool.sql(self.statements().insert_secret)).bind(app).bind(candidate).bind(now_ms).execute(pool).await?;
            text(&sqlx::query(&pool.sql(SELECT_SECRET)).bind(app).fetch_one(pool).await?, "secret")
        })
    }
}

#[cfg(test)]
mod tests {
    use xtimer_core::config::DatabaseConfig;

    use super::*;

    #[tokio::test]
    async fn tokens_resolve_to_their_app_and_an_app_keeps_its_first_secret() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("a.db").display());
        let db = Database::connect(&DatabaseConfig { url, max_connections: 2 }).await.unwrap();
        assert_eq!(db.token_app("h1").await.unwrap(), None);
        assert_eq!(db.issue_token("billing", "h1", "s1", 1).await.unwrap(), "s1");
        assert_eq!(db.issue_token("billing", "h2", "s2", 2).await.unwrap(), "s1", "a second token keeps the secret");
        assert_eq!(db.token_app("h1").await.unwrap().as_deref(), Some("billing"));
        assert_eq!(db.token_app("h2").await.unwrap().as_deref(), Some("billing"));
        assert!(db.issue_token("ops", "h1", "x", 3).await.is_err(), "a token hash is unique");
        assert_eq!(db.app_secret("billing").await.unwrap().as_deref(), Some("s1"));
        assert_eq!(db.app_secret("ops").await.unwrap(), None, "the failed issue left nothing");
        assert_eq!(db.ensure_secret(SERVER_SECRET_APP, "first", 4).await.unwrap(), "first");
        assert_eq!(db.ensure_secret(SERVER_SECRET_APP, "second", 5).await.unwrap(), "first");
    }
}
