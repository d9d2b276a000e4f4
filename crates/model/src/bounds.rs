//! Size limits of what a client sends: how many labels, annotations, rules, attachments, node
//! sets, parameters and domains an object may have, and how long any string and how long any
//! other list may be. Checked on the JSON object of a create or of an update's result, or on
//! the proto message of a create as it serialises ([`check_message`]), before anything else, so
//! an oversized request is refused with the field, the limit and its size.

use serde_json::Value;

use crate::Invalid;
use crate::labels::is_qualified_key;

mod message;

pub use message::{MessageError, check_message};

/// Labels per object (keys and values follow the Kubernetes label syntax).
pub const MAX_LABELS: usize = 64;
/// Annotations per object.
pub const MAX_ANNOTATIONS: usize = 64;
/// Bytes of one annotation value.
pub const MAX_ANNOTATION_VALUE_BYTES: usize = 4096;
/// Ingress rules, and separately egress rules, of one SecurityGroup.
pub const MAX_RULES_PER_DIRECTION: usize = 200;
/// Network attachments of one workload.
pub const MAX_ATTACHMENTS: usize = 16;
/// SecurityGroups of one network attachment.
pub const MAX_SECURITY_GROUPS_PER_ATTACHMENT: usize = 16;
/// Node sets of one Cluster.
pub const MAX_NODE_SETS: usize = 32;
/// Entries of a `template_parameters` map.
pub const MAX_TEMPLATE_PARAMETERS: usize = 64;
/// Bytes of a `template_parameters` map written as JSON.
pub const MAX_TEMPLATE_PARAMETERS_BYTES: usize = 16 * 1024;
/// DNS domains of one Tenant.
pub const MAX_TENANT_DOMAINS: usize = 32;
/// Bytes of any other string field (references, CIDRs, titles, descriptions…).
pub const MAX_STRING_BYTES: usize = 4096;
/// Entries of any other list or map.
pub const MAX_LIST_ITEMS: usize = 256;

/// Bytes of a list's or watch's `filter`, and of its `order`.
pub const MAX_QUERY_BYTES: usize = 4096;

/// Checks the size of a `filter` or `order` parameter (`field` names it).
pub fn check_query(field: &str, text: &str) -> Result<(), Invalid> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(Invalid::new(
            field,
            format!(
                "{} bytes is too long: at most {MAX_QUERY_BYTES} bytes",
                text.len()
            ),
        ));
    }
    Ok(())
}

/// Lists and maps with a limit of their own: (path, `[]` standing for any index; what the
/// entries are; the limit).
const LIMITS: &[(&str, &str, usize)] = &[
    ("spec.ingress", "ingress rules", MAX_RULES_PER_DIRECTION),
    ("spec.egress", "egress rules", MAX_RULES_PER_DIRECTION),
    (
        "spec.compute_network_attachments",
        "network attachments",
        MAX_ATTACHMENTS,
    ),
    (
        "spec.network_attachments",
        "network attachments",
        MAX_ATTACHMENTS,
    ),
    (
        "spec.compute_network_attachments[].security_groups",
        "security groups",
        MAX_SECURITY_GROUPS_PER_ATTACHMENT,
    ),
    (
        "spec.network_attachments[].security_groups",
        "security groups",
        MAX_SECURITY_GROUPS_PER_ATTACHMENT,
    ),
    (
        "spec.network_attachment.security_groups",
        "security groups",
        MAX_SECURITY_GROUPS_PER_ATTACHMENT,
    ),
    ("spec.node_sets", "node sets", MAX_NODE_SETS),
    (
        "spec.template_parameters",
        "template parameters",
        MAX_TEMPLATE_PARAMETERS,
    ),
    ("spec.domains", "domains", MAX_TENANT_DOMAINS),
];

/// Strings with a limit of their own: (path, limit in bytes).
const STRING_LIMITS: &[(&str, usize)] = &[
    (
        "spec.user_data",
        crate::kinds::baremetal_instance::MAX_USER_DATA_BYTES,
    ),
    (
        "spec.ssh_public_key",
        crate::kinds::baremetal_instance::MAX_SSH_PUBLIC_KEY_BYTES,
    ),
];

/// The byte limit of the string at `pattern`.
fn string_limit_of(pattern: &str) -> usize {
    STRING_LIMITS
        .iter()
        .find(|(p, _)| *p == pattern)
        .map_or(MAX_STRING_BYTES, |(_, max)| *max)
}

/// Top-level parts of an object that the server writes (never checked: not the client's).
const SERVER_ROOTS: &[&str] = &["id", "metadata", "status"];

/// Checks every limit of this module on an API object (`{"id","metadata",…}`).
pub fn check_object(obj: &Value) -> Result<(), Invalid> {
    if let Some(meta) = obj.get("metadata") {
        check_metadata(meta)?;
    }
    let Some(map) = obj.as_object() else {
        return Ok(());
    };
    for (k, v) in map {
        if !SERVER_ROOTS.contains(&k.as_str()) {
            walk(v, k, k)?;
        }
    }
    Ok(())
}

/// Labels and annotations: counts, annotation keys (qualified names) and value sizes. (Label
/// syntax, which bounds label keys and values, is checked by [`crate::labels::check_labels`].)
pub fn check_metadata(meta: &Value) -> Result<(), Invalid> {
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        count("metadata.labels", "labels", labels.len(), MAX_LABELS)?;
    }
    let Some(annotations) = meta.get("annotations").and_then(Value::as_object) else {
        return Ok(());
    };
    count(
        "metadata.annotations",
        "annotations",
        annotations.len(),
        MAX_ANNOTATIONS,
    )?;
    for (key, value) in annotations {
        let field = format!("metadata.annotations[\"{key}\"]");
        if !is_qualified_key(key) {
            return Err(Invalid::new(
                field,
                "annotation key must be [prefix/]name: name ≤63 characters of letters, digits, '-', '_', '.', starting and ending alphanumeric; prefix a DNS subdomain",
            ));
        }
        let len = value.as_str().map_or(0, str::len);
        if len > MAX_ANNOTATION_VALUE_BYTES {
            return Err(Invalid::new(
                field,
                format!(
                    "annotation value of {len} bytes is too long: at most {MAX_ANNOTATION_VALUE_BYTES} bytes"
                ),
            ));
        }
    }
    Ok(())
}

fn count(field: &str, what: &str, n: usize, max: usize) -> Result<(), Invalid> {
    if n > max {
        return Err(Invalid::new(
            field,
            format!("{n} {what} are too many: at most {max} are allowed"),
        ));
    }
    Ok(())
}

fn limit_of(pattern: &str) -> Option<(&'static str, usize)> {
    LIMITS
        .iter()
        .find(|(p, _, _)| *p == pattern)
        .map(|(_, what, max)| (*what, *max))
}

/// Checks `v` at `field` (real indices) whose pattern is `pattern` (`[]` for indices).
fn walk(v: &Value, field: &str, pattern: &str) -> Result<(), Invalid> {
    match v {
        Value::String(s) if s.len() > string_limit_of(pattern) => Err(Invalid::new(
            field,
            format!(
                "a string of {} bytes is too long: at most {} bytes",
                s.len(),
                string_limit_of(pattern)
            ),
        )),
        Value::Array(items) => {
            let (what, max) = limit_of(pattern).unwrap_or(("entries", MAX_LIST_ITEMS));
            count(field, what, items.len(), max)?;
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{field}[{i}]"), &format!("{pattern}[]"))?;
            }
            Ok(())
        }
        Value::Object(map) => {
            let (what, max) = limit_of(pattern).unwrap_or(("entries", MAX_LIST_ITEMS));
            count(field, what, map.len(), max)?;
            if pattern == "spec.template_parameters" {
                let bytes = serde_json::to_string(v).map_or(0, |s| s.len());
                if bytes > MAX_TEMPLATE_PARAMETERS_BYTES {
                    return Err(Invalid::new(
                        field,
                        format!(
                            "{bytes} bytes of parameters are too many: at most {MAX_TEMPLATE_PARAMETERS_BYTES} bytes (as JSON)"
                        ),
                    ));
                }
                // Free-form values: bounded by the size above.
                return Ok(());
            }
            for (k, item) in map {
                if k.len() > MAX_STRING_BYTES {
                    return Err(Invalid::new(
                        field,
                        format!(
                            "a key of {} bytes is too long: at most {MAX_STRING_BYTES} bytes",
                            k.len()
                        ),
                    ));
                }
                walk(item, &format!("{field}.{k}"), &format!("{pattern}.{k}"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(n: usize) -> Value {
        Value::Array(
            (0..n)
                .map(|_| json!({"protocol": "PROTOCOL_ALL", "ipv4_cidr": "0.0.0.0/0"}))
                .collect(),
        )
    }

    fn map(n: usize, value: Value) -> Value {
        Value::Object((0..n).map(|i| (format!("k{i}"), value.clone())).collect())
    }

    fn err(obj: Value) -> Invalid {
        check_object(&obj).expect_err("over a limit")
    }

    #[test]
    fn labels_and_annotations() {
        let ok = json!({"metadata": {"labels": map(MAX_LABELS, json!("v")), "annotations": map(MAX_ANNOTATIONS, json!("v"))}});
        assert!(check_object(&ok).is_ok());
        let e = err(json!({"metadata": {"labels": map(MAX_LABELS + 1, json!("v"))}}));
        assert_eq!(e.field, "metadata.labels");
        assert!(e.message.contains("65 labels") && e.message.contains("at most 64"));
        let e = err(json!({"metadata": {"annotations": map(MAX_ANNOTATIONS + 1, json!("v"))}}));
        assert_eq!(e.field, "metadata.annotations");
        let e = err(json!({"metadata": {"annotations": {"bad key": "v"}}}));
        assert!(e.field.contains("bad key"), "{e}");
        let long = "x".repeat(MAX_ANNOTATION_VALUE_BYTES + 1);
        let e = err(json!({"metadata": {"annotations": {"a": long}}}));
        assert!(e.message.contains("4097 bytes") && e.message.contains("at most 4096"));
        let fits = "x".repeat(MAX_ANNOTATION_VALUE_BYTES);
        assert!(
            check_object(&json!({"metadata": {"annotations": {"example.com/a": fits}}})).is_ok()
        );
    }

    #[test]
    fn rules_attachments_node_sets_parameters_domains() {
        assert!(
            check_object(&json!({"spec": {"ingress": rules(200), "egress": rules(200)}})).is_ok()
        );
        let e = err(json!({"spec": {"egress": rules(201)}}));
        assert_eq!(e.field, "spec.egress");
        assert!(e.message.contains("201 egress rules") && e.message.contains("at most 200"));
        let att = json!({"subnet": "s"});
        let e = err(json!({"spec": {"compute_network_attachments": vec![att.clone(); 17]}}));
        assert_eq!(e.field, "spec.compute_network_attachments");
        assert!(e.message.contains("17 network attachments"));
        assert!(check_object(&json!({"spec": {"network_attachments": vec![att; 16]}})).is_ok());
        let sgs: Vec<String> = (0..17).map(|i| format!("sg{i}")).collect();
        let e = err(
            json!({"spec": {"network_attachments": [{"subnet": "s", "security_groups": sgs}]}}),
        );
        assert_eq!(e.field, "spec.network_attachments[0].security_groups");
        let e = err(json!({"spec": {"network_attachment": {"security_groups": sgs}}}));
        assert_eq!(e.field, "spec.network_attachment.security_groups");
        let e = err(json!({"spec": {"node_sets": map(33, json!({"host_type": "x", "size": 1}))}}));
        assert!(e.message.contains("33 node sets") && e.message.contains("at most 32"));
        let e = err(json!({"spec": {"template_parameters": map(65, json!(1))}}));
        assert!(e.message.contains("65 template parameters"));
        let big = "x".repeat(MAX_TEMPLATE_PARAMETERS_BYTES);
        let e = err(json!({"spec": {"template_parameters": {"a": big}}}));
        assert!(e.message.contains("at most 16384 bytes"), "{e}");
        let e = err(json!({"spec": {"domains": vec!["a.example"; 33]}}));
        assert!(e.message.contains("33 domains"));
    }

    #[test]
    fn query_parameters() {
        assert!(check_query("filter", &"x".repeat(MAX_QUERY_BYTES)).is_ok());
        let e = check_query("order", &"x".repeat(MAX_QUERY_BYTES + 1)).unwrap_err();
        assert_eq!(e.field, "order");
        assert!(e.message.contains("4097 bytes") && e.message.contains("at most 4096"));
    }

    #[test]
    fn any_other_string_or_list() {
        let e = err(json!({"description": "x".repeat(MAX_STRING_BYTES + 1)}));
        assert_eq!(e.field, "description");
        assert!(e.message.contains("4097 bytes"));
        let e = err(json!({"spec": {"cidrs": vec!["10.0.0.0/24"; MAX_LIST_ITEMS + 1]}}));
        assert_eq!(e.field, "spec.cidrs");
        assert!(e.message.contains("257 entries"));
        // What the server writes is not the client's: status is never checked.
        assert!(
            check_object(&json!({"status": {"message": "x".repeat(MAX_STRING_BYTES + 1)}})).is_ok()
        );
    }
}
