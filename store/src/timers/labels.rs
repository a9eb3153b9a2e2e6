//! A timer's labels: the JSON column it is read back from, and a row per
//! label in `t_timer_label`, which selectors find it by.

use xtimer_core::labels::Labels;

use crate::db::{on_tx, Tx};
use crate::driver::Dialect;
use crate::Result;

const SET_LABELS: &str = "UPDATE t_timer SET labels = $1 WHERE timer_id = $2";
const DELETE_LABELS: &str = "DELETE FROM t_timer_label WHERE timer_id = $1";
const INSERT_LABEL: &str = "INSERT INTO t_timer_label (timer_id, app, lkey, lvalue) VALUES ($1, $2, $3, $4)";

/// Stores timer `id`'s labels: the JSON column it is read back from, and a
/// row per label that selectors find it by.
pub(super) async fn write_labels(tx: &mut Tx, id: i64, app: &str, labels: &Labels) -> Result<()> {
    let json = (!labels.is_empty()).then(|| serde_json::to_string(labels).expect("labels serialize"));
    on_tx!(tx, c => {
        sqlx::query(&c.sql(SET_LABELS)).bind(json).bind(id).execute(&mut *c).await?;
        sqlx::query(&c.sql(DELETE_LABELS)).bind(id).execute(&mut *c).await?;
        for (key, value) in labels {
            sqlx::query(&c.sql(INSERT_LABEL)).bind(id).bind(app).bind(key).bind(value).execute(&mut *c).await?;
        }
    });
    Ok(())
}
