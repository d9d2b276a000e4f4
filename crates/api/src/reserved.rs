//! Labels and annotations under `osac.openshift.io/` belong to the server: the default
//! networking, auto-provisioned and orphaned markers that the cleanup and the tenant controller
//! trust, and the controllers' bookkeeping annotations. A client may not set one on create; on
//! update the stored ones keep their values (a client may leave them out) and a client that
//! sends a reserved key with another value, or a new one, is refused. The one exception is the
//! default label on a tenant's own VirtualNetwork, Subnets and SecurityGroup
//! ([`crate::default_label`]).

use std::collections::BTreeMap;

use osac_model::Kind;
use osac_model::defaults::{RESERVED_PREFIX, is_reserved_key};

use crate::default_label::client_settable;

use crate::error::{ApiError, ApiResult};

fn refused(field: &str, key: &str, verb: &str) -> ApiError {
    ApiError::invalid(format!(
        "{field}[\"{key}\"]: keys under {RESERVED_PREFIX} are reserved for the server and cannot be {verb} by clients"
    ))
}

/// Whether a client may not write `key` of `field` on an object of `kind`.
fn server_only(kind: Kind, field: &str, key: &str) -> bool {
    is_reserved_key(key) && !(field == "metadata.labels" && client_settable(kind, key))
}

/// Refuses reserved keys in the labels or annotations of a create request of `kind`.
pub fn check_create(
    kind: Kind,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> ApiResult<()> {
    for (field, map) in [
        ("metadata.labels", labels),
        ("metadata.annotations", annotations),
    ] {
        if let Some(key) = map.keys().find(|k| server_only(kind, field, k)) {
            return Err(refused(field, key, "set"));
        }
    }
    Ok(())
}

/// The labels (or annotations) an update stores: the client's, with every reserved key as it is
/// stored. Refuses a reserved key the client adds or changes.
pub fn merge_update(
    kind: Kind,
    field: &str,
    stored: &BTreeMap<String, String>,
    requested: BTreeMap<String, String>,
) -> ApiResult<BTreeMap<String, String>> {
    for (key, value) in &requested {
        if !server_only(kind, field, key) {
            continue;
        }
        match stored.get(key) {
            Some(v) if v == value => {}
            Some(_) => return Err(refused(field, key, "changed")),
            None => return Err(refused(field, key, "set")),
        }
    }
    let mut out = requested;
    for (key, value) in stored {
        if is_reserved_key(key) && !out.contains_key(key) {
            out.insert(key.clone(), value.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn create_refuses_reserved_keys() {
        let e = check_create(
            Kind::ExternalIp,
            &map(&[("osac.openshift.io/default", "true")]),
            &map(&[]),
        )
        .unwrap_err();
        assert!(
            e.message
                .contains("metadata.labels[\"osac.openshift.io/default\"]")
        );
        assert!(
            check_create(
                Kind::ExternalIp,
                &map(&[("app", "web")]),
                &map(&[("example.com/x", "1")])
            )
            .is_ok()
        );
        // A tenant's own default label is the one exception (its rules: default_label).
        let default = map(&[("osac.openshift.io/default", "true")]);
        assert!(check_create(Kind::Subnet, &default, &map(&[])).is_ok());
        assert!(check_create(Kind::Subnet, &map(&[]), &default).is_err());
        let orphaned = map(&[("osac.openshift.io/orphaned", "true")]);
        assert!(check_create(Kind::Subnet, &orphaned, &map(&[])).is_err());
    }

    #[test]
    fn update_keeps_stored_reserved_keys() {
        let stored = map(&[("osac.openshift.io/default", "true"), ("app", "a")]);
        let out = merge_update(
            Kind::ExternalIp,
            "metadata.labels",
            &stored,
            map(&[("app", "b")]),
        )
        .unwrap();
        assert_eq!(
            out,
            map(&[("osac.openshift.io/default", "true"), ("app", "b")])
        );
        let same = map(&[("osac.openshift.io/default", "true")]);
        assert!(merge_update(Kind::ExternalIp, "metadata.labels", &stored, same).is_ok());
        let changed = map(&[("osac.openshift.io/default", "false")]);
        assert!(merge_update(Kind::ExternalIp, "metadata.labels", &stored, changed).is_err());
        let added = map(&[("osac.openshift.io/orphaned", "true")]);
        assert!(merge_update(Kind::ExternalIp, "metadata.labels", &stored, added).is_err());
    }
}
