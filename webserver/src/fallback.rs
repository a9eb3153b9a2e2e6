//! The fallbacks that keep unknown paths and methods in the envelope: a
//! 404 naming the routes near the one asked for, a 405 naming the methods
//! the route takes.

use axum::extract::Request;
use axum::http::{header, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Fallback for a path no route has: a 404 envelope, naming the routes
/// whose name is near the one asked for (`getTimers`: `getAppTimers`).
pub async fn no_route(method: Method, uri: Uri) -> ApiError {
    let path = uri.path();
    let near = near_routes(path);
    let hint = match near.as_slice() {
        [] => String::new(),
        [one] => format!(": did you mean `{one}`?"),
        [first, rest @ ..] => format!(": did you mean `{first}` or `{}`?", rest.join("` or `")),
    };
    ApiError::NoRoute { method: method.to_string(), path: path.to_owned(), hint }
}

/// At most two routes (`GET /api/xtimer/getAppTimers`) under the same
/// folder as `path` whose name is near its last segment: first those whose
/// name holds every word of it (`getTimers`: get, timers), then by edit
/// distance, if within a typo's ([`xtimer_core::suggest::typo_distance`]).
pub fn near_routes(path: &str) -> Vec<String> {
    use xtimer_core::suggest::{edit_distance, typo_distance};

    let Some((folder, name)) = path.rsplit_once('/') else { return Vec::new() };
    if name.is_empty() {
        return Vec::new();
    }
    let mut candidates: Vec<(&str, &str)> = Vec::new();
    for (route, item) in &crate::api::document().paths.paths {
        let methods = [("GET", &item.get), ("POST", &item.post), ("PUT", &item.put), ("DELETE", &item.delete)];
        candidates
            .extend(methods.into_iter().filter(|(_, op)| op.is_some()).map(|(method, _)| (method, route.as_str())));
    }
    let words = camel_words(name);
    let mut scored: Vec<(bool, usize, String)> = candidates
        .into_iter()
        .filter_map(|(method, route)| {
            let (route_folder, route_name) = route.rsplit_once('/')?;
            if route_folder != folder || route_name == name {
                return None;
            }
            let route_words = camel_words(route_name);
            let holds_every_word = words.len() > 1 && words.iter().all(|w| route_words.contains(w));
            let distance = edit_distance(&name.to_ascii_lowercase(), &route_name.to_ascii_lowercase());
            (holds_every_word || distance <= typo_distance(name))
                .then(|| (!holds_every_word, distance, format!("{method} {route}")))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.2 == b.2);
    scored.into_iter().take(2).map(|(_, _, route)| route).collect()
}

/// The words of a camelCase or snake_case name, lower case:
/// `getAppTimers`: get, app, timers.
fn camel_words(name: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if c == '_' || c == '-' {
            previous_lower = false;
            words.push(String::new());
            continue;
        }
        if c.is_ascii_uppercase() && previous_lower || words.is_empty() {
            words.push(String::new());
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        if let Some(word) = words.last_mut() {
            word.push(c.to_ascii_lowercase());
        }
    }
    words.retain(|w| !w.is_empty());
    words
}

/// Fallback for a route that exists, called with another method: a 405 envelope.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed { method: method.to_string(), path: uri.path().to_owned(), allow: String::new() }
}

/// Middleware: a 405 names the methods its route takes. axum sets the
/// `Allow` header after the fallback ran, so the message is written here.
pub async fn name_allowed_methods(request: Request, next: Next) -> Response {
    let (method, path) = (request.method().to_string(), request.uri().path().to_owned());
    let response = next.run(request).await;
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let Some(allow) = response.headers().get(header::ALLOW).cloned() else { return response };
    let text = allow.to_str().unwrap_or_default().to_owned();
    let mut rewritten = ApiError::MethodNotAllowed { method, path, allow: text }.into_response();
    rewritten.headers_mut().insert(header::ALLOW, allow);
    rewritten
}

#[cfg(test)]
mod tests {
    use super::{camel_words, near_routes};

    #[test]
    fn a_route_near_an_unknown_one_is_named() {
        assert_eq!(camel_words("getAppTimers"), ["get", "app", "timers"]);
        assert_eq!(camel_words("create_task"), ["create", "task"]);
        let near = near_routes("/api/xtimer/getTimers");
        assert_eq!(near.first().map(String::as_str), Some("GET /api/xtimer/getAppTimers"), "{near:?}");
        assert_eq!(near_routes("/xtimer/creatTimer")[0], "POST /xtimer/createTimer");
        assert!(near_routes("/api/xtimer/frobnicate").is_empty());
        assert!(near_routes("/nothing/here").is_empty());
    }
}
