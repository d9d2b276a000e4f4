//! References between objects: which fields of a kind hold the id of another object.
//!
//! The store indexes these so that deletion protection, dependent wake-ups and capacity counts
//! never scan objects.

use serde_json::Value;

use crate::Kind;

/// One reference field of a kind: a dotted JSON path in the object body and the kinds it names.
#[derive(Debug, Clone, Copy)]
pub struct RefField {
    /// Dotted path inside the object body, e.g. `spec.virtual_network`.
    pub path: &'static str,
    /// The kind the reference points to, or None for a polymorphic (workload) target.
    pub target: Option<Kind>,
}

impl RefField {
    /// A reference to an object of `target`.
    pub const fn to(path: &'static str, target: Kind) -> Self {
        RefField {
            path,
            target: Some(target),
        }
    }

    /// A reference to a workload of any of the workload kinds (which one, the field name says).
    pub const fn workload(path: &'static str) -> Self {
        RefField { path, target: None }
    }
}

/// The reference fields of `kind` (from its table in [`crate::kinds`]).
pub fn ref_fields(kind: Kind) -> &'static [RefField] {
    kind.spec().references
}

/// Whether any reference field can name an object of `kind` (workloads are the targets of
/// the polymorphic fields). Nothing ever references objects of the other kinds, so looking
/// up their referrers is pointless.
pub fn is_referenced(kind: Kind) -> bool {
    Kind::ALL.into_iter().any(|k| {
        ref_fields(k).iter().any(|f| match f.target {
            Some(target) => target == kind,
            None => Kind::WORKLOADS.contains(&kind),
        })
    })
}

/// Whether `key` has the form of an object id (a hyphenated UUID, as the server assigns):
/// reference fields holding such a key name an object by id, anything else by name.
pub fn is_object_id(key: &str) -> bool {
    let b = key.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Reads a dotted path of a JSON body as a string; missing or non-string ⇒ None.
pub fn string_at<'a>(body: &'a Value, path: &str) -> Option<&'a str> {
    path.split('.')
        .try_fold(body, |v, seg| v.get(seg))?
        .as_str()
}

/// Expands a reference path into (concrete field, value) pairs. Path segments ending in `[]`
/// walk every element of a list (`a[].b` → `a[0].b`, `a[1].b`), segments ending in `{}` every
/// entry of a map (`node_sets{}.host_type` → `node_sets.workers.host_type`).
fn expand<'a>(v: &'a Value, segs: &[&str], prefix: String, out: &mut Vec<(String, &'a str)>) {
    let Some((seg, rest)) = segs.split_first() else {
        if let Some(s) = v.as_str().filter(|s| !s.is_empty()) {
            out.push((prefix, s));
        }
        return;
    };
    let join = |p: &str, s: &str| {
        if p.is_empty() {
            s.to_string()
        } else {
            format!("{p}.{s}")
        }
    };
    if let Some(name) = seg.strip_suffix("[]") {
        if let Some(items) = v.get(name).and_then(Value::as_array) {
            for (i, item) in items.iter().enumerate() {
                expand(item, rest, format!("{}[{i}]", join(&prefix, name)), out);
            }
        }
    } else if let Some(name) = seg.strip_suffix("{}") {
        if let Some(map) = v.get(name).and_then(Value::as_object) {
            for (key, item) in map {
                expand(item, rest, join(&join(&prefix, name), key), out);
            }
        }
    } else if let Some(child) = v.get(*seg) {
        expand(child, rest, join(&prefix, seg), out);
    }
}

/// The (field, target id) pairs an object body holds; empty references are skipped.
pub fn references(kind: Kind, body: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in ref_fields(kind) {
        let segs: Vec<&str> = f.path.split('.').collect();
        let mut found = Vec::new();
        expand(body, &segs, String::new(), &mut found);
        out.extend(found.into_iter().map(|(field, id)| (field, id.to_string())));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn attachments_and_nat_gateways_are_never_referenced() {
        use crate::Kind;
        assert!(!super::is_referenced(Kind::ExternalIpAttachment));
        assert!(!super::is_referenced(Kind::NatGateway));
        assert!(!super::is_referenced(Kind::Tenant));
        for k in [
            Kind::Subnet,
            Kind::ExternalIp,
            Kind::ComputeInstance,
            Kind::Cluster,
            Kind::Host,
        ] {
            assert!(super::is_referenced(k), "{k}");
        }
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn object_ids_are_hyphenated_uuids() {
        assert!(is_object_id("0190c0de-7a3b-7cc1-8f00-0123456789ab"));
        assert!(!is_object_id("future-cluster"));
        assert!(!is_object_id("0190c0de7a3b7cc18f000123456789ab"));
        assert!(!is_object_id("0190c0de-7a3b-7cc1-8f00-0123456789ag"));
    }

    #[test]
    fn references_skip_empty_fields() {
        let body = json!({"spec": {"external_ip": "e1", "compute_instance": "", "cluster": "c1"}});
        let refs = references(Kind::ExternalIpAttachment, &body);
        assert_eq!(
            refs,
            vec![
                ("spec.external_ip".into(), "e1".into()),
                ("spec.cluster".into(), "c1".into())
            ]
        );
    }

    #[test]
    fn list_and_map_paths_expand() {
        let body = json!({"a": [{"s": "x", "g": ["p", "q"]}, {"s": "y"}], "m": {"w": {"t": "h"}}});
        let mut out = Vec::new();
        expand(&body, &["a[]", "g[]"], String::new(), &mut out);
        assert_eq!(
            out,
            vec![
                ("a[0].g[0]".to_string(), "p"),
                ("a[0].g[1]".to_string(), "q")
            ]
        );
        let mut out = Vec::new();
        expand(&body, &["m{}", "t"], String::new(), &mut out);
        assert_eq!(out, vec![("m.w.t".to_string(), "h")]);
    }
}
