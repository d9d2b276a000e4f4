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

macro_rules! field {
    ($path:expr, $target:expr) => {
        RefField {
            path: $path,
            target: $target,
        }
    };
}

/// The reference fields of `kind`.
pub fn ref_fields(kind: Kind) -> &'static [RefField] {
    use Kind::*;
    match kind {
        VirtualNetwork => &[field!("spec.network_class", Some(NetworkClass))],
        Subnet => &[field!("spec.virtual_network", Some(VirtualNetwork))],
        SecurityGroup => &[field!("spec.virtual_network", Some(VirtualNetwork))],
        ExternalIp => &[field!("spec.pool", Some(ExternalIpPool))],
        ExternalIpAttachment => &[
            field!("spec.external_ip", Some(ExternalIp)),
            field!("spec.compute_instance", None),
            field!("spec.cluster", None),
            field!("spec.baremetal_instance", None),
        ],
        NatGateway => &[
            field!("spec.virtual_network", Some(VirtualNetwork)),
            field!("spec.external_ip", Some(ExternalIp)),
        ],
        NetworkClass | ExternalIpPool | HostType | Tenant => &[],
    }
}

/// Reads a dotted path of a JSON body as a string; missing or non-string ⇒ None.
pub fn string_at<'a>(body: &'a Value, path: &str) -> Option<&'a str> {
    path.split('.')
        .try_fold(body, |v, seg| v.get(seg))?
        .as_str()
}

/// The (field, target id) pairs an object body holds; empty references are skipped.
pub fn references(kind: Kind, body: &Value) -> Vec<(&'static str, String)> {
    ref_fields(kind)
        .iter()
        .filter_map(|f| {
            string_at(body, f.path)
                .filter(|s| !s.is_empty())
                .map(|s| (f.path, s.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_skip_empty_fields() {
        let body = json!({"spec": {"external_ip": "e1", "compute_instance": "", "cluster": "c1"}});
        let refs = references(Kind::ExternalIpAttachment, &body);
        assert_eq!(
            refs,
            vec![
                ("spec.external_ip", "e1".into()),
                ("spec.cluster", "c1".into())
            ]
        );
    }
}
