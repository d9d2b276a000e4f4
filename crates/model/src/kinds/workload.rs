//! Rules shared by the three workload kinds (ComputeInstance, BareMetalInstance, Cluster):
//! the security groups and the primary flag of network attachments, and what a VM's and a
//! bare-metal instance's attachments have in common.

use crate::{Invalid, pb};

/// A network attachment of a VM or a bare-metal instance as its spec holds it: a subnet and
/// its security groups (names or ids as requested, ids once stored).
pub trait MachineAttachment {
    /// The subnet and the security groups.
    fn subnet_and_groups(&self) -> (&str, &[String]);
    /// The subnet and the security groups, to store what they resolved to.
    fn subnet_and_groups_mut(&mut self) -> (&mut String, &mut Vec<String>);
}

impl MachineAttachment for pb::ComputeNetworkAttachment {
    fn subnet_and_groups(&self) -> (&str, &[String]) {
        (&self.subnet, &self.security_groups)
    }
    fn subnet_and_groups_mut(&mut self) -> (&mut String, &mut Vec<String>) {
        (&mut self.subnet, &mut self.security_groups)
    }
}

impl MachineAttachment for pb::BareMetalNetworkAttachment {
    fn subnet_and_groups(&self) -> (&str, &[String]) {
        (&self.subnet, &self.security_groups)
    }
    fn subnet_and_groups_mut(&mut self) -> (&mut String, &mut Vec<String>) {
        (&mut self.subnet, &mut self.security_groups)
    }
}

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
