//! Rules shared by the three workload kinds (ComputeInstance, BareMetalInstance, Cluster):
//! the security groups and the primary flag of network attachments.

use crate::Invalid;

/// Checks the security-group references of one attachment: no empty entry, none twice.
pub fn security_group_refs(field: &str, sgs: &[String]) -> Result<(), Invalid> {
    let mut seen = std::collections::HashSet::new();
    for (i, sg) in sgs.iter().enumerate() {
        if sg.is_empty() {
            return Err(Invalid::new(
                format!("{field}[{i}]"),
                "security group reference is empty",
            ));
        }
        if !seen.insert(sg.as_str()) {
            return Err(Invalid::new(
                format!("{field}[{i}]"),
                format!("security group '{sg}' is listed twice"),
            ));
        }
    }
    Ok(())
}

/// The multi-NIC primary rule: one attachment ⇒ it is primary; several ⇒ exactly one
/// `primary: true`. Returns the primary flags to store.
pub fn primary_flags(field: &str, flags: &[bool]) -> Result<Vec<bool>, Invalid> {
    if flags.len() == 1 {
        return Ok(vec![true]);
    }
    let n = flags.iter().filter(|p| **p).count();
    if flags.len() > 1 && n != 1 {
        return Err(Invalid::new(
            field,
            format!(
                "with several network attachments exactly one must be primary (got {n} of {} marked primary: true)",
                flags.len()
            ),
        ));
    }
    Ok(flags.to_vec())
}
