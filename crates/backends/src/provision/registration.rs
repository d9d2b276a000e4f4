//! The provisioner registration: a file of the managers directory with `role: provisioner`
//! chooses the driver that makes workloads exist (`sim`, `exec` or `linux`). At most one per
//! directory; none = the server's default (see the workloads docs).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::registration::{
    DriverConfig, RawExec, Registration, RegistrationError, exec_config, is_dns_label,
};

/// The `role:` value of a provisioner registration (and its `OSAC_ROLE` for `exec`).
pub const PROVISIONER_ROLE: &str = "provisioner";

/// A registered provisioner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProvisionerRegistration {
    /// Unique name (DNS label) among the directory's registrations.
    pub name: String,
    /// Free text shown by `osac admin managers`.
    pub description: String,
    /// `sim`, `exec` (with its settings) or `linux`.
    #[serde(flatten)]
    pub driver: DriverConfig,
}

impl ProvisionerRegistration {
    /// Always [`PROVISIONER_ROLE`] (listings show it beside the managers' roles).
    pub fn role(&self) -> &'static str {
        PROVISIONER_ROLE
    }
}

/// What one registration file registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistrationFile {
    /// A fabric or k8s manager.
    Manager(Registration),
    /// The provisioner.
    Provisioner(ProvisionerRegistration),
}

/// Just the role, to tell the two kinds of file apart before parsing strictly.
#[derive(Deserialize)]
struct RoleOnly {
    #[serde(default)]
    role: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvisioner {
    name: String,
    #[allow(dead_code)]
    role: String,
    #[serde(default)]
    description: String,
    driver: String,
    #[serde(default)]
    exec: Option<RawExec>,
}

impl RegistrationFile {
    /// Parses one registration file; `base_dir` resolves relative `exec.command` paths.
    pub fn from_yaml(text: &str, base_dir: &Path) -> Result<RegistrationFile, RegistrationError> {
        let role: RoleOnly = serde_yaml_ng::from_str(text)?;
        if role.role.as_deref() != Some(PROVISIONER_ROLE) {
            return Registration::from_yaml(text, base_dir).map(RegistrationFile::Manager);
        }
        let raw: RawProvisioner = serde_yaml_ng::from_str(text)?;
        if !is_dns_label(&raw.name) {
            return Err(RegistrationError::NotDnsLabel {
                what: "provisioner name",
                value: raw.name,
            });
        }
        let driver = match (raw.driver.as_str(), raw.exec) {
            ("exec", Some(exec)) => DriverConfig::Exec(exec_config(exec, base_dir)?),
            ("exec", None) => return Err(RegistrationError::MissingExecSettings),
            ("sim" | "linux", Some(_)) => {
                return Err(RegistrationError::UnexpectedSettings {
                    driver: raw.driver,
                    key: "exec",
                });
            }
            ("sim", None) => DriverConfig::Sim,
            ("linux", None) => DriverConfig::Linux(serde_yaml_ng::Value::Null),
            _ => return Err(RegistrationError::UnknownProvisionerDriver(raw.driver)),
        };
        Ok(RegistrationFile::Provisioner(ProvisionerRegistration {
            name: raw.name,
            description: raw.description,
            driver,
        }))
    }

    /// The registration's name.
    pub fn name(&self) -> &str {
        match self {
            RegistrationFile::Manager(r) => &r.name,
            RegistrationFile::Provisioner(r) => &r.name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RegistrationFile, RegistrationError> {
        RegistrationFile::from_yaml(text, Path::new("/etc/osac/managers"))
    }

    #[test]
    fn parses_provisioners() {
        let RegistrationFile::Provisioner(p) = parse(
            "name: kubevirt\nrole: provisioner\ndescription: d\ndriver: exec\nexec: {command: kv/run.sh, timeout_seconds: 600}\n",
        )
        .unwrap() else {
            panic!("not a provisioner")
        };
        let DriverConfig::Exec(exec) = &p.driver else {
            panic!("not exec")
        };
        assert_eq!(exec.command, Path::new("/etc/osac/managers/kv/run.sh"));
        assert_eq!(exec.timeout_seconds, 600);
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["driver"], "exec");
        assert_eq!(p.role(), "provisioner");
        for (text, driver) in [
            ("name: p\nrole: provisioner\ndriver: sim\n", "sim"),
            ("name: p\nrole: provisioner\ndriver: linux\n", "linux"),
        ] {
            let RegistrationFile::Provisioner(p) = parse(text).unwrap() else {
                panic!("not a provisioner")
            };
            assert_eq!(p.driver.kind(), driver);
        }
        assert!(matches!(
            parse("name: f\nrole: fabric\ndriver: sim\n").unwrap(),
            RegistrationFile::Manager(_)
        ));
    }

    #[test]
    fn rejects_bad_provisioner_files() {
        let cases = [
            (
                "name: p\nrole: provisioner\ndriver: exec\n",
                "needs an 'exec' section",
            ),
            (
                "name: p\nrole: provisioner\ndriver: sim\nexec: {command: a}\n",
                "not valid for driver 'sim'",
            ),
            (
                "name: p\nrole: provisioner\ndriver: ironic\n",
                "unknown provisioner driver 'ironic'",
            ),
            (
                "name: p\nrole: provisioner\ndriver: sim\ncapabilities: [ipv4]\n",
                "unknown field `capabilities`",
            ),
            (
                "name: P\nrole: provisioner\ndriver: sim\n",
                "not a DNS label",
            ),
        ];
        for (text, want) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err:?} lacks {want:?}");
        }
    }
}
