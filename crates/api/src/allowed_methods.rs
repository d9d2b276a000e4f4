//! Which HTTP methods each path of each surface takes, derived from the proto services through
//! the OpenAPI document (Create ⇒ POST, Update ⇒ PATCH, Delete ⇒ DELETE, List and Get ⇒ GET,
//! and HEAD with GET): any other method is answered 405 with an `Allow` header and the JSON
//! error body, before authentication, instead of reaching the handler (which would answer 403
//! or 404 for a route that exists for other collections).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Path template (`/api/fulfillment/v1/subnets/{id}`) → the methods it takes (upper case).
pub type Table = BTreeMap<String, BTreeSet<String>>;

/// The methods of every path of an OpenAPI document.
pub fn table(document: &Value) -> Table {
    let Some(paths) = document.get("paths").and_then(Value::as_object) else {
        return Table::new();
    };
    paths
        .iter()
        .map(|(path, item)| {
            let methods = item
                .as_object()
                .into_iter()
                .flat_map(|o| o.keys())
                .filter(|k| ["get", "put", "post", "patch", "delete"].contains(&k.as_str()))
                .map(|k| k.to_ascii_uppercase())
                .collect();
            (path.clone(), methods)
        })
        .collect()
}

/// The table of the served document (empty, so nothing is refused here, if the document could
/// not be generated: the server's start-up fails on that anyway).
static TABLE: LazyLock<Table> = LazyLock::new(|| {
    crate::openapi::document(osac_proto::FILE_DESCRIPTOR_SET)
        .map(|d| table(&d))
        .unwrap_or_default()
});

/// The methods `path` takes by `table`: an exact path, or `{prefix}/{id}` for one segment
/// below a documented collection. None: the document does not know the path.
pub fn allowed<'t>(table: &'t Table, path: &str) -> Option<&'t BTreeSet<String>> {
    if let Some(m) = table.get(path) {
        return Some(m);
    }
    let (parent, id) = path.rsplit_once('/')?;
    if id.is_empty() {
        return None;
    }
    table.get(&format!("{parent}/{{id}}"))
}

/// The `Allow` header value of a method set: GET implies HEAD, as the router serves it.
pub fn allow_header(methods: &BTreeSet<String>) -> String {
    let mut out: Vec<&str> = Vec::new();
    for m in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] {
        let listed = if m == "HEAD" {
            methods.contains("GET")
        } else {
            methods.contains(m)
        };
        if listed {
            out.push(m);
        }
    }
    out.join(",")
}

/// Middleware: a method (POST, PUT, PATCH, DELETE, OPTIONS, …) on a documented path that does
/// not take it is answered 405.
pub async fn refuse_undeclared(req: Request, next: Next) -> Response {
    match refusal(&TABLE, req.method(), req.uri().path()) {
        Some(r) => r,
        None => next.run(req).await,
    }
}

/// The 405 for `method` on `path`, if `table` documents the path without that method.
pub fn refusal(table: &Table, method: &Method, path: &str) -> Option<Response> {
    let methods = allowed(table, path)?;
    let served = if method == Method::HEAD {
        methods.contains("GET")
    } else {
        methods.contains(method.as_str())
    };
    if served {
        return None;
    }
    let body = json!({
        "code": "METHOD_NOT_ALLOWED",
        "message": format!("{method} is not allowed on this path (its Allow header lists what is)"),
        "details": [],
    });
    let mut resp = (StatusCode::METHOD_NOT_ALLOWED, axum::Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(&allow_header(methods)) {
        resp.headers_mut().insert(header::ALLOW, v);
    }
    Some(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> Table {
        let doc = crate::openapi::document(osac_proto::FILE_DESCRIPTOR_SET).expect("document");
        table(&doc)
    }

    #[test]
    fn read_only_collections_refuse_writes_per_surface() {
        let t = served();
        for path in [
            "/api/fulfillment/v1/network_classes",
            "/api/fulfillment/v1/external_ip_pools",
            "/api/fulfillment/v1/host_types",
            "/api/fulfillment/v1/events",
        ] {
            let r = refusal(&t, &Method::POST, path).expect(path);
            assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{path}");
            assert_eq!(r.headers()[header::ALLOW], "GET,HEAD", "{path}");
            for m in [Method::PATCH, Method::DELETE, Method::PUT] {
                assert!(
                    refusal(&t, &m, &format!("{path}/some-id")).is_some(),
                    "{m} {path}"
                );
            }
            assert!(refusal(&t, &Method::GET, path).is_none());
            assert!(refusal(&t, &Method::HEAD, path).is_none());
            assert!(refusal(&t, &Method::OPTIONS, path).is_some());
        }
        // The provider's surface writes them.
        assert!(refusal(&t, &Method::POST, "/api/private/v1/network_classes").is_none());
        assert!(refusal(&t, &Method::DELETE, "/api/private/v1/host_types/x").is_none());
        // A tenant collection takes every write; PUT is nowhere.
        assert!(refusal(&t, &Method::POST, "/api/fulfillment/v1/subnets").is_none());
        assert!(refusal(&t, &Method::PATCH, "/api/fulfillment/v1/subnets/x").is_none());
        let put = refusal(&t, &Method::PUT, "/api/fulfillment/v1/subnets/x").expect("PUT");
        assert_eq!(put.headers()[header::ALLOW], "GET,HEAD,PATCH,DELETE");
        // Unknown paths are left to the router.
        assert!(refusal(&t, &Method::POST, "/api/fulfillment/v1/nothing").is_none());
        assert!(refusal(&t, &Method::POST, "/api/fulfillment/v1/tenants").is_none());
    }
}
