//! What request validation enforces beyond the proto types, as JSON Schema keywords: name and
//! label syntax (`osac_model::labels`), numeric bounds, the fields validation requires and the
//! closed sets of strings. Each rule here states one the server refuses; a schema that allowed
//! less than the server would make clients refuse valid requests, one that allowed more would
//! promise answers the server does not give.

use serde_json::{Value, json};

use crate::service::MAX_LIMIT;

/// An object name: empty (unnamed) or a DNS label of at most 63 characters
/// (`osac_model::labels::check_name`); BareMetalTemplates (catalog items such as `bcm_h100`)
/// may also have '_' inside, so the shared schema admits it (other kinds refuse it with 400).
pub(super) const NAME: &str = "^([a-z0-9]([-_a-z0-9]{0,61}[a-z0-9])?)?$";

/// A label or annotation key: `[prefix/]name`, the prefix DNS labels joined by dots, the name at
/// most 63 letters, digits, '-', '_', '.', starting and ending alphanumeric
/// (`osac_model::labels::is_qualified_key`).
pub(super) const QUALIFIED_KEY: &str = "^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?){0,3}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";

/// A label value: empty or at most 63 letters, digits, '-', '_', '.', starting and ending
/// alphanumeric.
pub(super) const LABEL_VALUE: &str = "^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$";

/// What a path id can be: an object id or a name (a name with other characters names nothing).
pub(super) const ID: &str = "^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}$|^[0-9a-fA-F-]{36}$";

/// The roles of a token.
pub(super) const ROLES: [&str; 3] = ["provider-admin", "tenant-admin", "tenant-user"];

/// Keywords added to field `field` of message `message` (full proto name).
pub(super) fn field_extra(message: &str, field: &str) -> Option<Value> {
    let short = message.rsplit('.').next().unwrap_or(message);
    Some(match (short, field) {
        ("Metadata", "name") => json!({ "pattern": NAME, "maxLength": 63 }),
        ("Metadata", "labels") => json!({
            "propertyNames": { "pattern": QUALIFIED_KEY, "maxLength": 316 },
            "additionalProperties": { "type": "string", "pattern": LABEL_VALUE, "maxLength": 63 },
        }),
        ("Metadata", "annotations") => json!({
            "propertyNames": { "pattern": QUALIFIED_KEY, "maxLength": 316 },
        }),
        ("SecurityRule", "port_from" | "port_to") => json!({ "minimum": 0, "maximum": 65535 }),
        ("ExplainReachabilityRequest", "port") => json!({ "minimum": 0, "maximum": 65535 }),
        ("CreateTokenRequest", "role") => json!({ "enum": ROLES }),
        // Written by the server; what a request sends there is ignored.
        (_, "status") if !message.ends_with("Request") => json!({ "readOnly": true }),
        ("Metadata", "creation_timestamp" | "deletion_timestamp" | "creator") => {
            json!({ "readOnly": true })
        }
        ("ListRequest", "limit") => json!({ "minimum": 0, "maximum": MAX_LIMIT }),
        ("ListRequest", "offset") => json!({ "minimum": 0 }),
        (event, "type") if event.ends_with("WatchEvent") => {
            json!({ "enum": ["ADDED", "MODIFIED", "DELETED"] })
        }
        _ => return None,
    })
}

/// The fields validation refuses a request without, per message (short proto name), and that
/// every answer carries (a NetworkClass's `fabric_manager` is required on create but hidden from
/// tenants, so it is not listed).
pub(super) fn required_of(message: &str) -> &'static [&'static str] {
    let short = message.rsplit('.').next().unwrap_or(message);
    match short {
        "CreateTokenRequest" => &["role"],
        "ExplainReachabilityRequest" => &["source", "destination", "protocol"],
        "SecurityRule" => &["protocol"],
        "SubnetSpec" | "SecurityGroupSpec" => &["virtual_network"],
        "NatGatewaySpec" => &["virtual_network", "external_ip"],
        "ExternalIPAttachmentSpec" => &["external_ip"],
        "Subnet" | "SecurityGroup" | "NatGateway" | "ExternalIPAttachment" => &["spec"],
        event if event.ends_with("WatchEvent") => &["type", "object"],
        _ => &[],
    }
}

/// Merges `extra`'s keywords into `schema` (an object; `$ref` schemas are wrapped so the
/// keywords sit beside the reference).
pub(super) fn merge(schema: &mut Value, extra: Value) {
    if let (Some(o), Value::Object(extra)) = (schema.as_object_mut(), extra) {
        for (k, v) in extra {
            o.insert(k, v);
        }
    }
}
