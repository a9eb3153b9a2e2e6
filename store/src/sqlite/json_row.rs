//! A page of timers as SQLite's `json_group_array` makes it: the columns of
//! [`TIMER_COLUMNS`] as one JSON array per row, read in place.

use crate::sql::definition::TIMER_COLUMNS;
use crate::sql::Columns;
use crate::{Error, Result};

/// [`TIMER_COLUMNS`] as the arguments of SQLite's `json_array` (each
/// column's expression, without its name), and the names in that order.
pub(crate) static TIMER_JSON: std::sync::LazyLock<(String, Vec<&'static str>)> = std::sync::LazyLock::new(|| {
    let (exprs, names): (Vec<_>, Vec<_>) = TIMER_COLUMNS
        .split(", ")
        .map(|column| column.rsplit_once(" AS ").filter(|(e, _)| e.ends_with(')')).unwrap_or((column, column)))
        .unzip();
    (format!("json_array({})", exprs.join(", ")), names)
});

/// One timer of a page read as one JSON array of rows (SQLite's
/// `json_group_array` of [`TIMER_JSON`]): its values in that order, text
/// borrowed from the page where it has no escapes.
pub(crate) struct JsonRow<'a>(Vec<JsonCell<'a>>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for JsonRow<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct RowVisitor;
        impl<'de> serde::de::Visitor<'de> for RowVisitor {
            type Value = JsonRow<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a row's values")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Self::Value, A::Error> {
                let mut cells = Vec::with_capacity(TIMER_JSON.1.len());
                while let Some(cell) = seq.next_element()? {
                    cells.push(cell);
                }
                Ok(JsonRow(cells))
            }
        }
        deserializer.deserialize_seq(RowVisitor)
    }
}

/// A value of a [`JsonRow`]: what SQLite's `json_array` makes of a column.
pub(crate) enum JsonCell<'a> {
    Null,
    Int(i64),
    Text(std::borrow::Cow<'a, str>),
    /// A real, an array or an object: no timer column is one.
    Other,
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for JsonCell<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_any(CellVisitor)
    }
}

struct CellVisitor;

impl<'de> serde::de::Visitor<'de> for CellVisitor {
    type Value = JsonCell<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a column's value")
    }
    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(JsonCell::Null)
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<Self::Value, E> {
        Ok(JsonCell::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<Self::Value, E> {
        Ok(i64::try_from(v).map_or(JsonCell::Other, JsonCell::Int))
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Ok(JsonCell::Other)
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
        Ok(JsonCell::Text(std::borrow::Cow::Borrowed(v)))
    }
    fn visit_string<E>(self, v: String) -> std::result::Result<Self::Value, E> {
        Ok(JsonCell::Text(std::borrow::Cow::Owned(v)))
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(JsonCell::Text(std::borrow::Cow::Owned(v.to_owned())))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Self::Value, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(JsonCell::Other)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
        Ok(JsonCell::Other)
    }
}

impl JsonRow<'_> {
    fn value(&self, column: &str) -> Result<&JsonCell<'_>> {
        // A scan of 23 names, most told apart by their length: no hashing.
        TIMER_JSON
            .1
            .iter()
            .position(|name| *name == column)
            .and_then(|i| self.0.get(i))
            .ok_or_else(|| Error::Corrupt(format!("a JSON row of t_timer has no {column}")))
    }
}

impl Columns for JsonRow<'_> {
    fn int(&self, column: &str) -> Result<i64> {
        self.opt_int(column)?.ok_or_else(|| Error::Corrupt(format!("t_timer.{column} is null")))
    }

    fn opt_int(&self, column: &str) -> Result<Option<i64>> {
        match self.value(column)? {
            JsonCell::Null => Ok(None),
            JsonCell::Int(value) => Ok(Some(*value)),
            _ => Err(Error::Corrupt(format!("t_timer.{column} is not an integer"))),
        }
    }

    fn text(&self, column: &str) -> Result<String> {
        self.opt_text(column)?.ok_or_else(|| Error::Corrupt(format!("t_timer.{column} is null")))
    }

    fn opt_text(&self, column: &str) -> Result<Option<String>> {
        match self.value(column)? {
            JsonCell::Null => Ok(None),
            JsonCell::Text(text) => Ok(Some(text.to_string())),
            _ => Err(Error::Corrupt(format!("t_timer.{column} is not text"))),
        }
    }
}
