//! The OpenAPI 3.1 document of the REST API, generated from the proto descriptor: every service
//! of `osacnet.v1` becomes routes under `/api/fulfillment/v1`, every service of
//! `osacnet.admin.v1` routes under `/api/private/v1` (List/Get/Watch ⇒ GET, Create ⇒ POST,
//! Update ⇒ PATCH, Delete ⇒ DELETE), and the messages reachable from them become
//! `components.schemas` (JSON Schema 2020-12, proto-JSON shapes) with the proto comments as
//! descriptions. Routes not defined in proto (managers, dataplane GC, health, metrics) are added
//! by hand. Served at `GET /api/openapi.json`; a copy is checked in as `docs/openapi.json`.

use std::collections::{BTreeMap, VecDeque};

use prost::Message;
use prost_types::FileDescriptorSet;
use serde_json::{Map, Value, json};

mod constraints;
mod hand_written;
mod routes;
mod schemas;

use hand_written::hand_written;
use routes::{collection_paths, json_content, single_path};
use schemas::{Index, Schemas, Svc, schema_ref};

/// Path of the document itself.
pub const PATH: &str = "/api/openapi.json";

/// Why the document cannot be generated from a descriptor.
#[derive(Debug, thiserror::Error)]
pub enum OpenApiError {
    #[error("cannot decode the file descriptor set")]
    Decode(#[from] prost::DecodeError),
    #[error("the descriptor references type '{0}', which it does not define")]
    UnknownType(String),
    #[error("service '{0}' maps to no REST collection")]
    UnknownService(String),
    #[error("cannot render the document")]
    Render(#[from] serde_json::Error),
}

/// A REST surface: the proto package its services live in and the URL prefix.
struct Surface {
    package: &'static str,
    prefix: &'static str,
    name: &'static str,
}

const SURFACES: [Surface; 2] = [
    Surface {
        package: "osacnet.v1",
        prefix: "/api/fulfillment/v1",
        name: "fulfillment",
    },
    Surface {
        package: "osacnet.admin.v1",
        prefix: "/api/private/v1",
        name: "private",
    },
];

/// Services that are not collections: service full name → (path under the prefix).
const SINGLE_ROUTES: [(&str, &str); 1] = [("osacnet.admin.v1.Tokens", "tokens")];

/// Services of one action, served as `POST` on both surfaces: service full name → (its rpc,
/// path under each prefix).
const ACTION_ROUTES: [(&str, &str, &str); 1] =
    [("osacnet.v1.Reachability", "Explain", "reachability:explain")];

/// The OpenAPI document of the REST API described by an encoded `FileDescriptorSet`.
pub fn document(descriptor: &[u8]) -> Result<Value, OpenApiError> {
    let set = FileDescriptorSet::decode(descriptor)?;
    let ix = Index::new(&set);
    let mut schemas = Schemas {
        ix: &ix,
        done: BTreeMap::new(),
        queue: VecDeque::new(),
    };
    let mut paths = Map::new();
    for surface in &SURFACES {
        let mut services: Vec<&Svc<'_>> = ix
            .services
            .iter()
            .filter(|s| s.package == surface.package)
            .collect();
        services.sort_by_key(|s| s.desc.name());
        for svc in services {
            let full = format!("{}.{}", svc.package, svc.desc.name());
            if ACTION_ROUTES.iter().any(|(name, _, _)| *name == full) {
                continue;
            }
            match SINGLE_ROUTES.iter().find(|(name, _)| *name == full) {
                Some((_, path)) => single_path(surface, svc, path, &mut schemas, &mut paths)?,
                None => collection_paths(surface, svc, &mut schemas, &mut paths)?,
            }
        }
    }
    for (full, rpc, path) in ACTION_ROUTES {
        let svc = ix
            .services
            .iter()
            .find(|s| format!("{}.{}", s.package, s.desc.name()) == full)
            .ok_or_else(|| OpenApiError::UnknownService(full.to_string()))?;
        for surface in &SURFACES {
            routes::action_path(surface, svc, rpc, path, &mut schemas, &mut paths)?;
        }
    }
    schemas.drain()?;
    let mut components = schemas.done;
    hand_written(&mut paths, &mut components);
    Ok(json!({
        "openapi": "3.1.0",
        "info": {
            "title": "osac-net REST API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Tenant collections under /api/fulfillment/v1, provider collections under /api/private/v1. JSON is the proto3 JSON mapping with proto field names (snake_case), enums by name, int64 as strings, unset fields omitted and unknown fields rejected. Generated from the proto definitions.",
        },
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer", "description": "A token minted with POST /api/private/v1/tokens (kept in the store), or a JWT of the identity provider." }
            },
            "responses": {
                "Error": { "description": "An error.", "content": json_content(schema_ref("Error")) }
            },
            "schemas": components,
        },
    }))
}

/// The document as served and checked in: pretty JSON with a final newline.
pub fn document_json(descriptor: &[u8]) -> Result<Vec<u8>, OpenApiError> {
    let mut out = serde_json::to_vec_pretty(&document(descriptor)?)?;
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests;
