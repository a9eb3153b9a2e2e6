//! The two prefixes the timer routes answer under (`/api/xtimer` and its
//! alias `/xtimer`), and a route documented once served under each.

use utoipa::openapi::path::{Operation, PathItem, Paths};
use utoipa_axum::router::UtoipaMethodRouter;

/// The prefixes the timer routes answer under, and whether each is the
/// alias (its operation ids end in `_alias`: ids are unique in a document).
pub const TIMER_PREFIXES: [(&str, bool); 2] = [("/api/xtimer", false), ("/xtimer", true)];

/// `routes` served under `prefix`: each path prefixed and, for an
/// `alias`, each operation id suffixed `_alias`.
pub fn under<S>(prefix: &str, alias: bool, routes: UtoipaMethodRouter<S>) -> UtoipaMethodRouter<S> {
    let (schemas, paths, method_router) = routes;
    let mut prefixed = Paths::new();
    for (path, mut item) in paths.paths {
        if alias {
            for op in operations(&mut item) {
                op.operation_id = op.operation_id.take().map(|id| format!("{id}_alias"));
            }
        }
        prefixed.paths.insert(format!("{prefix}{path}"), item);
    }
    (schemas, prefixed, method_router)
}

/// Every operation of `item`.
pub fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .flatten()
}
