//! BareMetalInstance: a tenant workload on a whole Host of a HostType (or of a
//! BareMetalInstanceType's HostTypes), attached to subnets through the machine's interfaces;
//! what the provisioner installs (image, SSH key, user data) and its power policy.

use crate::kinds::KindSpec;
use crate::kinds::host_type::LIFECYCLE_ROLE;
use crate::kinds::workload::{primary_flags, security_group_refs};
use crate::refs::RefField;
use crate::validate::required;
use crate::{Invalid, Kind, Scope, pb};

/// The facts about BareMetalInstances. A new instance is provisioning; the Host it runs on is
/// recorded in `status.host`.
pub const SPEC: KindSpec = KindSpec {
    aliases: &["bmi", "bm", "baremetal"],
    state_prefix: Some("BARE_METAL_INSTANCE_STATE"),
    initial_state: "PROVISIONING",
    immutable_fields: &[
        "spec.host_type",
        "spec.template",
        "spec.catalog_item",
        "spec.template_parameters",
        "spec.auto_external_ip_attachment",
        "spec.instance_type",
        "spec.image",
        "spec.ssh_public_key",
        "spec.user_data",
        "spec.network_attachments[].subnet",
        "spec.network_attachments[].interface",
        "spec.network_attachments[].primary",
    ],
    references: &[
        RefField::to("spec.host_type", Kind::HostType),
        RefField::to("spec.template", Kind::BareMetalTemplate),
        RefField::to("spec.instance_type", Kind::BareMetalInstanceType),
        RefField::to("spec.network_attachments[].subnet", Kind::Subnet),
        RefField::to(
            "spec.network_attachments[].security_groups[]",
            Kind::SecurityGroup,
        ),
        RefField::to("status.host", Kind::Host),
    ],
    tenant_user_may_write: true,
    needs_fabric_finalizer: true,
    ..KindSpec::new(
        "BareMetalInstance",
        "baremetal_instances",
        "baremetalinstance",
        "baremetalinstances",
        Scope::Tenant,
    )
};

/// The network attachments of a BareMetalInstance checked against the machine's interfaces
/// (a HostType's, or a BareMetalInstanceType's network ports; `what` names the source, e.g.
/// `HostType 'bm'`): interfaces exist, never `lifecycle`, none twice, named when there are
/// several, no more than the attachable interfaces; a single attachment without interface gets
/// the first `fabric` one; the primary rule. Returns the attachments to store.
pub fn network_attachments(
    atts: &[pb::BareMetalNetworkAttachment],
    interfaces: &[pb::HostTypeInterface],
    what: &str,
) -> Result<Vec<pb::BareMetalNetworkAttachment>, Invalid> {
    let field = "spec.network_attachments";
    if interfaces.is_empty() {
        return Err(Invalid::new(
            "spec.host_type",
            format!(
                "{what} has no interfaces (a virtual-machine type); a bare-metal instance needs a bare-metal type"
            ),
        ));
    }
    let attachable: Vec<&str> = interfaces
        .iter()
        .filter(|i| i.role != LIFECYCLE_ROLE)
        .map(|i| i.name.as_str())
        .collect();
    if atts.len() > attachable.len() {
        return Err(Invalid::new(
            field,
            format!(
                "{} network attachments but {what} has only {} tenant-attachable interfaces ({})",
                atts.len(),
                attachable.len(),
                attachable.join(", ")
            ),
        ));
    }
    let mut out = Vec::with_capacity(atts.len());
    let mut used = std::collections::HashSet::new();
    for (i, a) in atts.iter().enumerate() {
        let at = format!("{field}[{i}]");
        required(format!("{at}.subnet"), &a.subnet)?;
        security_group_refs(&format!("{at}.security_groups"), &a.security_groups)?;
        let mut a = a.clone();
        if a.interface.is_empty() {
            if atts.len() > 1 {
                return Err(Invalid::new(
                    format!("{at}.interface"),
                    "with several network attachments every attachment must name its interface",
                ));
            }
            a.interface = interfaces
                .iter()
                .find(|i| i.role == "fabric")
                .map(|i| i.name.as_str())
                .ok_or_else(|| {
                    Invalid::new(
                        format!("{at}.interface"),
                        format!("{what} has no fabric interface to default to; name the interface"),
                    )
                })?
                .to_string();
        }
        let Some(iface) = interfaces.iter().find(|x| x.name == a.interface) else {
            return Err(Invalid::new(
                format!("{at}.interface"),
                format!(
                    "{what} has no interface '{}' (attachable: {})",
                    a.interface,
                    attachable.join(", ")
                ),
            ));
        };
        if iface.role == LIFECYCLE_ROLE {
            return Err(Invalid::new(
                format!("{at}.interface"),
                format!(
                    "interface '{}' is a lifecycle interface and is never tenant-attachable",
                    a.interface
                ),
            ));
        }
        if !used.insert(a.interface.clone()) {
            return Err(Invalid::new(
                format!("{at}.interface"),
                format!("interface '{}' is attached twice", a.interface),
            ));
        }
        out.push(a);
    }
    let flags = primary_flags(field, &out.iter().map(|a| a.primary).collect::<Vec<_>>())?;
    for (a, p) in out.iter_mut().zip(flags) {
        a.primary = p;
    }
    Ok(out)
}

/// Bytes of `spec.user_data`.
pub const MAX_USER_DATA_BYTES: usize = 64 * 1024;
/// Bytes of `spec.ssh_public_key`.
pub const MAX_SSH_PUBLIC_KEY_BYTES: usize = 8 * 1024;
/// Bytes of `spec.image`.
pub const MAX_IMAGE_BYTES: usize = 1024;
/// Bytes of `spec.restart_trigger`.
pub const MAX_RESTART_TRIGGER_BYTES: usize = 253;

/// OpenSSH public key algorithms accepted in `spec.ssh_public_key`.
pub const SSH_KEY_TYPES: [&str; 8] = [
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-dss",
];

/// Checks what the provisioner is handed: sizes of image, SSH key, user data and restart
/// trigger; the SSH key is one OpenSSH public key line (`<type> <base64> [comment]`) of a
/// known type; the image and trigger are single-line text.
pub fn machine_fields(spec: &pb::BareMetalInstanceSpec) -> Result<(), Invalid> {
    let too_long = |field: &str, len: usize, max: usize| {
        (len > max).then(|| {
            Invalid::new(
                field,
                format!("{len} bytes is too long: at most {max} bytes"),
            )
        })
    };
    for (field, len, max) in [
        ("spec.user_data", spec.user_data.len(), MAX_USER_DATA_BYTES),
        (
            "spec.ssh_public_key",
            spec.ssh_public_key.len(),
            MAX_SSH_PUBLIC_KEY_BYTES,
        ),
        ("spec.image", spec.image.len(), MAX_IMAGE_BYTES),
        (
            "spec.restart_trigger",
            spec.restart_trigger.len(),
            MAX_RESTART_TRIGGER_BYTES,
        ),
    ] {
        if let Some(e) = too_long(field, len, max) {
            return Err(e);
        }
    }
    for (field, value) in [
        ("spec.image", &spec.image),
        ("spec.restart_trigger", &spec.restart_trigger),
    ] {
        if value.chars().any(char::is_control) {
            return Err(Invalid::new(
                field,
                "must be one line of text without control characters",
            ));
        }
    }
    if pb::BareMetalRunStrategy::try_from(spec.run_strategy).is_err() {
        return Err(Invalid::new(
            "spec.run_strategy",
            format!(
                "{} is not a run strategy: ALWAYS, HALTED or MANUAL",
                spec.run_strategy
            ),
        ));
    }
    if !spec.ssh_public_key.is_empty() {
        ssh_public_key(spec.ssh_public_key.trim_end_matches(['\n', '\r']))?;
    }
    Ok(())
}

/// One OpenSSH public key line: a known type, its base64 blob (which itself starts with the
/// type), an optional comment.
fn ssh_public_key(key: &str) -> Result<(), Invalid> {
    use base64::Engine as _;
    let field = "spec.ssh_public_key";
    let bad = |why: &str| {
        Invalid::new(
            field,
            format!("not an OpenSSH public key ('<type> <base64> [comment]', one line): {why}"),
        )
    };
    if key.contains(['\n', '\r']) {
        return Err(bad("it has several lines"));
    }
    let mut parts = key.split_whitespace();
    let kind = parts.next().unwrap_or_default();
    if !SSH_KEY_TYPES.contains(&kind) {
        return Err(bad(&format!(
            "type '{kind}' is not one of {}",
            SSH_KEY_TYPES.join(", ")
        )));
    }
    let blob = parts.next().unwrap_or_default();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .map_err(|_| bad("the key is not valid base64"))?;
    // The blob is SSH wire format: a u32 length, then the type name again.
    let named = decoded
        .get(4..)
        .zip(decoded.get(..4))
        .and_then(|(rest, len)| {
            let n = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
            rest.get(..n)
        });
    if named != Some(kind.as_bytes()) {
        return Err(bad(&format!("the key data is not a '{kind}' key")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::kinds::host_type::bare_metal_sample;

    #[test]
    fn baremetal_attachment_rules() {
        let ht = bare_metal_sample();
        let att = |iface: &str, primary: bool| pb::BareMetalNetworkAttachment {
            subnet: "s".into(),
            security_groups: vec![],
            interface: iface.into(),
            primary,
        };
        let check = |atts: &[pb::BareMetalNetworkAttachment]| {
            network_attachments(atts, &ht.interfaces, "HostType 'bm'")
        };
        // A single attachment defaults to the first fabric interface and is primary.
        let out = check(&[att("", false)]).unwrap();
        assert_eq!(
            (out[0].interface.as_str(), out[0].primary),
            ("data-0", true)
        );
        let e = check(&[att("eth7", false)]).unwrap_err();
        assert_eq!(e.field, "spec.network_attachments[0].interface");
        assert!(e.message.contains("no interface 'eth7'"));
        assert!(
            check(&[att("bmc-0", false)])
                .unwrap_err()
                .message
                .contains("lifecycle")
        );
        assert!(
            check(&[att("data-0", true), att("data-0", false)])
                .unwrap_err()
                .message
                .contains("attached twice")
        );
        assert!(
            check(&[att("data-0", true), att("", false)])
                .unwrap_err()
                .message
                .contains("must name its interface")
        );
        assert!(
            check(&[att("data-0", false), att("data-1", false)])
                .unwrap_err()
                .message
                .contains("exactly one must be primary")
        );
        let out = check(&[att("data-0", false), att("data-1", true)]).unwrap();
        assert!(!out[0].primary && out[1].primary);
        let four = [
            att("data-0", true),
            att("data-1", false),
            att("mgmt-0", false),
            att("bmc-0", false),
        ];
        assert!(
            check(&four)
                .unwrap_err()
                .message
                .contains("only 3 tenant-attachable")
        );
        let no_fabric = pb::HostType {
            interfaces: vec![ht.interfaces[0].clone()],
            ..Default::default()
        };
        assert!(
            network_attachments(&[att("", false)], &no_fabric.interfaces, "HostType 'x'")
                .unwrap_err()
                .message
                .contains("no fabric interface")
        );
        assert_eq!(
            network_attachments(&[att("", false)], &[], "HostType 'vm'")
                .unwrap_err()
                .field,
            "spec.host_type"
        );
    }

    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBfYvH0mCVjGkdrZ5ZKZQ1S1nNv3UQtbyH5oEi4pb0mV user@host";

    #[test]
    fn machine_fields_are_bounded_and_the_ssh_key_is_checked() {
        let spec = |f: fn(&mut pb::BareMetalInstanceSpec)| {
            let mut s = pb::BareMetalInstanceSpec::default();
            f(&mut s);
            s
        };
        machine_fields(&spec(|s| {
            s.ssh_public_key = format!("{ED25519}\n");
            s.user_data = "#cloud-config\npackages: [htop]\n".into();
            s.image = "rhel-9.4".into();
            s.restart_trigger = "2026-12-05T10:00:00Z".into();
        }))
        .unwrap();
        let field = |s: pb::BareMetalInstanceSpec| machine_fields(&s).unwrap_err();
        let e = field(spec(|s| s.user_data = "x".repeat(MAX_USER_DATA_BYTES + 1)));
        assert_eq!(e.field, "spec.user_data");
        assert!(e.message.contains("at most 65536 bytes"), "{}", e.message);
        let e = field(spec(|s| s.restart_trigger = "r".repeat(254)));
        assert_eq!(e.field, "spec.restart_trigger");
        assert_eq!(field(spec(|s| s.image = "a\nb".into())).field, "spec.image");
        assert_eq!(
            field(spec(|s| s.run_strategy = 9)).field,
            "spec.run_strategy"
        );
        for bad in [
            "hello",
            "ssh-foo AAAA",
            "ssh-ed25519 not*base64",
            // A valid RSA blob under the ed25519 name.
            "ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQ==",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBfYvH0mCVjGkdrZ5ZKZQ1S1nNv3UQtbyH5oEi4pb0mV\nssh-rsa x",
        ] {
            let s = pb::BareMetalInstanceSpec {
                ssh_public_key: bad.into(),
                ..Default::default()
            };
            let e = machine_fields(&s).unwrap_err();
            assert_eq!(e.field, "spec.ssh_public_key", "{bad}");
            assert!(
                e.message.contains("not an OpenSSH public key"),
                "{bad}: {e}"
            );
        }
    }
}
