//! Every route of the API with its documentation: each handler is routed
//! by `utoipa_axum::routes!` from its `#[utoipa::path]`, so a route is
//! documented where it is written and served where it is documented; the
//! OpenAPI document ([`document`]) is made of these routes.

use std::sync::OnceLock;

use axum::body::Bytes;
use axum::extract::Extension;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use xtimer_core::config::ServerConfig;

use crate::prefixes::{under, TIMER_PREFIXES};
use crate::replies::{AnyObject, OK};
use crate::state::AppState;
use crate::{metrics, openapi, routes, ui};

/// Every route; a batch call's body may be up to
/// `config.max_batch_body_bytes`.
pub fn routes(config: &ServerConfig) -> OpenApiRouter<AppState> {
    let mut api = OpenApiRouter::default()
        .routes(routes!(routes::health::health_check))
        .routes(routes!(routes::health::readiness_check))
        .routes(routes!(metrics::metrics_get))
        .routes(routes!(openapi_get));
    for (prefix, alias) in TIMER_PREFIXES {
        api = api.merge(routes::timers::routes(prefix, alias, config)).routes(under(
            prefix,
            alias,
            routes!(routes::nodes::nodes_list),
        ));
    }
    api.merge(routes::tasks::routes()).merge(ui::routes())
}

/// The OpenAPI document of [`routes`], built once.
pub fn document() -> &'static OpenApi {
    static DOC: OnceLock<OpenApi> = OnceLock::new();
    DOC.get_or_init(|| openapi::finish(routes(&ServerConfig::default()).into_openapi(), &constants()))
}

/// [`document`] as JSON; for tests and tools.
pub fn document_json() -> serde_json::Value {
    serde_json::to_value(document()).unwrap_or_default()
}

/// What the handlers' linked constants read as in the document.
fn constants() -> Vec<(&'static str, String)> {
    use crate::routes::timers::preview;
    vec![
        ("DEFAULT_PREVIEW_COUNT", preview::DEFAULT_PREVIEW_COUNT.to_string()),
        ("MAX_PREVIEW_COUNT", preview::MAX_PREVIEW_COUNT.to_string()),
        ("MAX_FIRES", format!("{} fires", ui::overview::MAX_FIRES)),
    ]
}

/// The document `GET /openapi.json` serves, as JSON text (given to the
/// route as an extension: the document is made of the routes).
#[derive(Clone)]
pub struct ServedDocument(pub Bytes);

/// `GET /openapi.json`: the OpenAPI 3.1 document of every route.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "_openapi.json",
    summary = "This document.",
    responses((status = 200, description = OK, body = AnyObject))
)]
pub async fn openapi_get(Extension(doc): Extension<ServedDocument>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], doc.0).into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_served_document_has_no_rustdoc_links() {
        let text = super::document().to_json().unwrap();
        assert!(!text.contains("[`"), "a rustdoc link is left in the OpenAPI document");
    }
}
