//! Deprecated inputs that still work, and the warning their answer carries so that clients can
//! tell their users: an HTTP `Warning` header on REST (RFC 7234 form `299 - "text"`, 299 =
//! "miscellaneous persistent warning") and a `warning` metadata entry of the same value on
//! gRPC. Only successful answers carry it; a refused request has its error instead.

use osac_model::Kind;
use serde_json::Value;

use crate::typed::Object;

/// Name of the HTTP header and of the gRPC metadata entry.
pub const WARNING: &str = "warning";

/// The warning of a ComputeInstance created with the deprecated `spec.network_attachments`.
pub const NETWORK_ATTACHMENTS: &str = "spec.network_attachments is deprecated: use \
     spec.compute_network_attachments (this request's attachments were converted and stored \
     there)";

/// The warning of a BareMetalInstance created with the deprecated `spec.catalog_item`.
pub const CATALOG_ITEM: &str = "spec.catalog_item is deprecated: use spec.template (this \
     request's catalog item was resolved and stored there)";

/// The warning a create of `kind` with this JSON body earns, if any. Accepts the proto field
/// name and its JSON (lowerCamelCase) name, as the body parser does.
pub fn create_warning_json(kind: Kind, body: &Value) -> Option<&'static str> {
    let field = |name: &str| body.get("spec").and_then(|spec| spec.get(name));
    let list = |name: &str| {
        field(name)
            .and_then(Value::as_array)
            .is_some_and(|list| !list.is_empty())
    };
    let text = |name: &str| {
        field(name)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    match kind {
        Kind::ComputeInstance if list("network_attachments") || list("networkAttachments") => {
            Some(NETWORK_ATTACHMENTS)
        }
        Kind::BareMetalInstance if text("catalog_item") || text("catalogItem") => {
            Some(CATALOG_ITEM)
        }
        _ => None,
    }
}

/// The warning a create of this message earns, if any.
pub fn create_warning(obj: &Object) -> Option<&'static str> {
    match obj {
        Object::ComputeInstance(ci) => ci
            .spec
            .as_ref()
            .is_some_and(|spec| !spec.network_attachments.is_empty())
            .then_some(NETWORK_ATTACHMENTS),
        Object::BareMetalInstance(bm) => bm
            .spec
            .as_ref()
            .is_some_and(|spec| !spec.catalog_item.is_empty())
            .then_some(CATALOG_ITEM),
        _ => None,
    }
}

/// The header (and metadata) value of a warning: `299 - "text"`.
pub fn warning_value(text: &str) -> String {
    format!("299 - \"{text}\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use osac_model::pb;
    use serde_json::json;

    #[test]
    fn only_the_deprecated_attachments_of_a_vm_warn() {
        let old = json!({"spec": {"network_attachments": [{"subnet": "a"}]}});
        let camel = json!({"spec": {"networkAttachments": [{"subnet": "a"}]}});
        let new = json!({"spec": {"compute_network_attachments": [{"subnet": "a"}]}});
        let empty = json!({"spec": {"network_attachments": []}});
        assert_eq!(
            create_warning_json(Kind::ComputeInstance, &old),
            Some(NETWORK_ATTACHMENTS)
        );
        assert_eq!(
            create_warning_json(Kind::ComputeInstance, &camel),
            Some(NETWORK_ATTACHMENTS)
        );
        assert_eq!(create_warning_json(Kind::ComputeInstance, &new), None);
        assert_eq!(create_warning_json(Kind::ComputeInstance, &empty), None);
        // Bare-metal instances name their current field `network_attachments`.
        assert_eq!(create_warning_json(Kind::BareMetalInstance, &old), None);

        let vm = |atts: Vec<pb::NetworkAttachment>| {
            Object::from(pb::ComputeInstance {
                spec: Some(pb::ComputeInstanceSpec {
                    network_attachments: atts,
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        let one = pb::NetworkAttachment {
            subnet: "a".into(),
            ..Default::default()
        };
        assert_eq!(create_warning(&vm(vec![one])), Some(NETWORK_ATTACHMENTS));
        assert_eq!(create_warning(&vm(Vec::new())), None);
    }

    #[test]
    fn only_a_set_catalog_item_of_a_bare_metal_instance_warns() {
        let old = json!({"spec": {"catalog_item": "bcm"}});
        let camel = json!({"spec": {"catalogItem": "bcm"}});
        let empty = json!({"spec": {"catalog_item": "", "template": "bcm"}});
        assert_eq!(
            create_warning_json(Kind::BareMetalInstance, &old),
            Some(CATALOG_ITEM)
        );
        assert_eq!(
            create_warning_json(Kind::BareMetalInstance, &camel),
            Some(CATALOG_ITEM)
        );
        assert_eq!(create_warning_json(Kind::BareMetalInstance, &empty), None);
        assert_eq!(create_warning_json(Kind::ComputeInstance, &old), None);
        let bm = |catalog_item: &str| {
            Object::from(pb::BareMetalInstance {
                spec: Some(pb::BareMetalInstanceSpec {
                    catalog_item: catalog_item.into(),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        assert_eq!(create_warning(&bm("bcm")), Some(CATALOG_ITEM));
        assert_eq!(create_warning(&bm("")), None);
    }

    #[test]
    fn the_value_is_rfc_7234_shaped_and_a_valid_header() {
        let v = warning_value(NETWORK_ATTACHMENTS);
        assert!(v.starts_with("299 - \"") && v.ends_with('"'), "{v}");
        assert!(axum::http::HeaderValue::from_str(&v).is_ok());
    }
}
