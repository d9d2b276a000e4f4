//! Names, label keys and label values: the Kubernetes-style syntax the API contract promises.

use std::collections::HashMap;

use crate::Invalid;

/// Annotation on a ComputeInstance naming the hosting cluster it runs on (written by its
/// controller when it first places the VM; the placement never changes afterwards).
pub const HOSTING_CLUSTER_ANNOTATION: &str = crate::defaults::reserved_key!("hosting-cluster");

/// Validates an object name: a DNS label of at most 63 characters.
pub fn check_name(field: &str, name: &str) -> Result<(), Invalid> {
    if name.is_empty() {
        return Ok(());
    }
    if name.len() > 63 {
        return Err(Invalid::new(
            field,
            format!("'{name}' is longer than 63 characters"),
        ));
    }
    if !is_dns_label(name) {
        return Err(Invalid::new(
            field,
            format!(
                "'{name}' is not a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit)"
            ),
        ));
    }
    Ok(())
}

/// Validates the name of an object of `kind`: a DNS label, except that catalog items
/// (BareMetalTemplates, named like `bcm_h100`) may also use `_` inside the name.
pub fn check_name_of(kind: crate::Kind, field: &str, name: &str) -> Result<(), Invalid> {
    if kind != crate::Kind::BareMetalTemplate || !name.contains('_') {
        return check_name(field, name);
    }
    if name.len() > 63 {
        return Err(Invalid::new(
            field,
            format!("'{name}' is longer than 63 characters"),
        ));
    }
    let b = name.as_bytes();
    let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !(ok(&b[0]) && ok(&b[b.len() - 1]) && b.iter().all(|c| ok(c) || matches!(c, b'-' | b'_'))) {
        return Err(Invalid::new(
            field,
            format!(
                "'{name}' is not a valid template name (lowercase letters, digits, '-' and '_', starting and ending with a letter or digit)"
            ),
        ));
    }
    Ok(())
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty() && ok(&b[0]) && ok(&b[b.len() - 1]) && b.iter().all(|c| ok(c) || *c == b'-')
}

fn is_label_segment(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    s.len() <= max
        && !b.is_empty()
        && alnum(&b[0])
        && alnum(&b[b.len() - 1])
        && b.iter()
            .all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
}

/// Whether `key` is a Kubernetes qualified name `[prefix/]name`: the prefix a DNS subdomain of
/// at most 253 characters, the name at most 63 characters of letters, digits, '-', '_', '.',
/// starting and ending alphanumeric.
pub fn is_qualified_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        p.len() <= 253
            && p.split('.')
                .all(|part| is_dns_label(part) && part.len() <= 63)
    });
    key.len() <= 316 && prefix_ok && is_label_segment(name, 63)
}

/// Validates labels: keys `[prefix/]name` (prefix a DNS subdomain ≤253, name ≤63), values ≤63.
pub fn check_labels(field: &str, labels: &HashMap<String, String>) -> Result<(), Invalid> {
    for (key, value) in labels {
        if !is_qualified_key(key) {
            return Err(Invalid::new(
                format!("{field}[\"{key}\"]"),
                "label key must be [prefix/]name: name ≤63 characters of letters, digits, '-', '_', '.', starting and ending alphanumeric; prefix a DNS subdomain",
            ));
        }
        if !value.is_empty() && !is_label_segment(value, 63) {
            return Err(Invalid::new(
                format!("{field}[\"{key}\"]"),
                format!(
                    "label value '{value}' must be ≤63 characters of letters, digits, '-', '_', '.', starting and ending alphanumeric"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_name("metadata.name", "my-net").is_ok());
        assert!(check_name("metadata.name", "").is_ok());
        assert!(check_name("metadata.name", "My_Net").is_err());
        assert!(check_name("metadata.name", "-a").is_err());
        assert!(check_name("metadata.name", &"a".repeat(64)).is_err());
    }

    #[test]
    fn labels() {
        let mut l = HashMap::new();
        l.insert("osac.openshift.io/default".to_string(), "true".to_string());
        l.insert("app".to_string(), String::new());
        assert!(check_labels("metadata.labels", &l).is_ok());
        l.insert("bad key".to_string(), "x".to_string());
        assert!(check_labels("metadata.labels", &l).is_err());
    }
}
