//! Manager registrations: one YAML file per manager in a config directory, so adding a
//! manager is adding a file, never a code change. (A `role: provisioner` file of the same
//! directory is parsed by [`crate::provision::RegistrationFile`].)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::contract::{Capability, Role};

/// Hosting clusters a `sim` k8s manager serves when its file names none.
pub const DEFAULT_SIM_HOSTING_CLUSTERS: [&str; 2] = ["hosting-a", "hosting-b"];

/// Default per-call timeout of the `exec` driver.
pub const DEFAULT_EXEC_TIMEOUT_SECONDS: u64 = 30;

/// Drivers this crate runs itself; `linux` needs a driver factory in the
/// [`crate::DriverContext`] (the `osac` server registers the one of `osac-linux`).
pub const AVAILABLE_DRIVERS: [&str; 2] = ["sim", "exec"];

/// A registered manager: who it is, what it does, and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Registration {
    /// Unique name (DNS label) referenced by NetworkClass `fabric_manager` / `k8s_manager`.
    pub name: String,
    /// Fabric or k8s.
    pub role: Role,
    /// Free text shown by `osac admin managers`.
    pub description: String,
    /// What the manager declares it supports.
    pub capabilities: BTreeSet<Capability>,
    /// How calls are carried out.
    #[serde(flatten)]
    pub driver: DriverConfig,
    /// k8s only: the hosting clusters overlays are created on (empty for fabric managers).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosting_clusters: Vec<String>,
}

/// Driver of a registration with its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverConfig {
    /// In-process simulation.
    Sim,
    /// Runs a command per operation.
    Exec(ExecConfig),
    /// The real dataplane on the local kernel; the value is the file's `linux:` block (Null
    /// when absent), interpreted by the driver factory that starts it (`osac-linux`).
    Linux(serde_yaml_ng::Value),
    /// An OVN deployment programmed through its northbound database; the value is the file's
    /// `ovn:` block, interpreted by the driver factory that starts it (`osac-ovn`).
    Ovn(serde_yaml_ng::Value),
}

impl DriverConfig {
    /// The YAML name of the driver.
    pub fn kind(&self) -> &'static str {
        match self {
            DriverConfig::Sim => "sim",
            DriverConfig::Exec(_) => "exec",
            DriverConfig::Linux(_) => "linux",
            DriverConfig::Ovn(_) => "ovn",
        }
    }
}

/// Listed as `driver: <kind>` plus the driver's settings under `exec:` / `linux:`.
impl Serialize for DriverConfig {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("driver", self.kind())?;
        match self {
            DriverConfig::Sim => {}
            DriverConfig::Exec(e) => map.serialize_entry("exec", e)?,
            DriverConfig::Linux(v) if v.is_null() => {}
            DriverConfig::Linux(v) => map.serialize_entry("linux", v)?,
            DriverConfig::Ovn(v) if v.is_null() => {}
            DriverConfig::Ovn(v) => map.serialize_entry("ovn", v)?,
        }
        map.end()
    }
}

/// Settings of the `exec` driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecConfig {
    /// Program to run; relative paths in the file are resolved against the file's directory.
    pub command: PathBuf,
    /// Arguments placed before the operation name.
    pub args: Vec<String>,
    /// Per-call timeout; the child is killed and the call is transient when it expires.
    pub timeout_seconds: u64,
    /// Extra environment for the child.
    pub env: BTreeMap<String, String>,
    /// Working directory of the child: the registration file's directory.
    pub working_dir: PathBuf,
}

/// Why a registration file is invalid.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    /// Not YAML, wrong types, unknown keys, bad role or capability.
    #[error("{0}")]
    Yaml(#[from] serde_yaml_ng::Error),
    /// Manager and hosting cluster names must be DNS labels.
    #[error(
        "{what} '{value}' is not a DNS label (1-63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit)"
    )]
    NotDnsLabel {
        /// Which field.
        what: &'static str,
        /// The offending value.
        value: String,
    },
    /// The `linux` driver (or another known one) has no factory in this process.
    #[error(
        "driver '{0}' is not available in this build (available: sim, exec); the osac server provides linux and ovn"
    )]
    DriverNotAvailable(String),
    /// A driver name nobody knows.
    #[error("unknown driver '{0}' (known: sim, exec, linux, ovn)")]
    UnknownDriver(String),
    /// A provisioner driver name nobody knows.
    #[error("unknown provisioner driver '{0}' (available: sim, exec, linux)")]
    UnknownProvisionerDriver(String),
    /// `driver: exec` without an `exec:` section.
    #[error("driver 'exec' needs an 'exec' section with at least 'command'")]
    MissingExecSettings,
    /// Settings of another driver given (e.g. `exec:` with `driver: sim`).
    #[error("'{key}' settings are not valid for driver '{driver}'")]
    UnexpectedSettings {
        /// The selected driver.
        driver: String,
        /// The stray section.
        key: &'static str,
    },
    /// An empty command.
    #[error("exec.command must not be empty")]
    EmptyCommand,
    /// A zero timeout.
    #[error("exec.timeout_seconds must be at least 1")]
    ZeroTimeout,
    /// Fabric managers do not serve hosting clusters.
    #[error("hosting_clusters is only valid for role k8s")]
    HostingClustersOnFabric,
    /// A k8s manager must serve at least one hosting cluster.
    #[error("a k8s manager needs at least one entry in hosting_clusters")]
    NoHostingClusters,
    /// A hosting cluster listed twice.
    #[error("hosting cluster '{0}' is listed twice")]
    DuplicateHostingCluster(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRegistration {
    name: String,
    role: Role,
    #[serde(default)]
    description: String,
    #[serde(default)]
    capabilities: Vec<Capability>,
    driver: String,
    #[serde(default)]
    hosting_clusters: Option<Vec<String>>,
    #[serde(default)]
    exec: Option<RawExec>,
    /// Settings of the `linux` driver (checked by its factory).
    #[serde(default)]
    linux: Option<serde_yaml_ng::Value>,
    /// Settings of the `ovn` driver (checked by its factory).
    #[serde(default)]
    ovn: Option<serde_yaml_ng::Value>,
}

/// The `exec:` section of a registration file (managers and the provisioner).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExec {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default = "default_timeout")]
    timeout_seconds: u64,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

fn default_timeout() -> u64 {
    DEFAULT_EXEC_TIMEOUT_SECONDS
}

/// DNS label check (RFC 1123): what manager and hosting cluster names must be.
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

impl Registration {
    /// A `sim` registration for programmatic setups (dev mode, tests): IPv4, IPv6 and
    /// dual-stack, and for k8s the default hosting clusters.
    pub fn sim(name: &str, role: Role) -> Registration {
        Registration {
            name: name.to_string(),
            role,
            description: format!("in-process simulated {role} manager"),
            capabilities: [Capability::Ipv4, Capability::Ipv6, Capability::DualStack]
                .into_iter()
                .collect(),
            driver: DriverConfig::Sim,
            hosting_clusters: match role {
                Role::Fabric => Vec::new(),
                Role::K8s => DEFAULT_SIM_HOSTING_CLUSTERS.map(String::from).to_vec(),
            },
        }
    }

    /// Parses one registration; `base_dir` resolves relative `exec.command` paths.
    pub fn from_yaml(text: &str, base_dir: &Path) -> Result<Registration, RegistrationError> {
        let mut raw: RawRegistration = serde_yaml_ng::from_str(text)?;
        if !is_dns_label(&raw.name) {
            return Err(RegistrationError::NotDnsLabel {
                what: "manager name",
                value: raw.name,
            });
        }
        let driver = match raw.driver.as_str() {
            "sim" => {
                if raw.exec.is_some() {
                    return Err(RegistrationError::UnexpectedSettings {
                        driver: raw.driver,
                        key: "exec",
                    });
                }
                DriverConfig::Sim
            }
            "exec" => {
                let exec = raw.exec.ok_or(RegistrationError::MissingExecSettings)?;
                DriverConfig::Exec(exec_config(exec, base_dir)?)
            }
            "linux" => {
                if raw.exec.is_some() {
                    return Err(RegistrationError::UnexpectedSettings {
                        driver: raw.driver,
                        key: "exec",
                    });
                }
                DriverConfig::Linux(raw.linux.take().unwrap_or(serde_yaml_ng::Value::Null))
            }
            "ovn" => {
                if raw.exec.is_some() {
                    return Err(RegistrationError::UnexpectedSettings {
                        driver: raw.driver,
                        key: "exec",
                    });
                }
                DriverConfig::Ovn(raw.ovn.take().unwrap_or(serde_yaml_ng::Value::Null))
            }
            _ => return Err(RegistrationError::UnknownDriver(raw.driver)),
        };
        if raw.linux.is_some() {
            return Err(RegistrationError::UnexpectedSettings {
                driver: driver.kind().to_string(),
                key: "linux",
            });
        }
        if raw.ovn.is_some() {
            return Err(RegistrationError::UnexpectedSettings {
                driver: driver.kind().to_string(),
                key: "ovn",
            });
        }
        let hosting_clusters = match (raw.role, raw.hosting_clusters) {
            (Role::Fabric, None) => Vec::new(),
            (Role::Fabric, Some(_)) => return Err(RegistrationError::HostingClustersOnFabric),
            (Role::K8s, Some(list)) => list,
            (Role::K8s, None) if matches!(driver, DriverConfig::Sim) => {
                DEFAULT_SIM_HOSTING_CLUSTERS.map(String::from).to_vec()
            }
            (Role::K8s, None) if matches!(driver, DriverConfig::Linux(_)) => {
                linux_hosting_clusters(&driver)
            }
            (Role::K8s, None) => Vec::new(),
        };
        if raw.role == Role::K8s && hosting_clusters.is_empty() {
            return Err(RegistrationError::NoHostingClusters);
        }
        let mut seen = BTreeSet::new();
        for cluster in &hosting_clusters {
            if !is_dns_label(cluster) {
                return Err(RegistrationError::NotDnsLabel {
                    what: "hosting cluster",
                    value: cluster.clone(),
                });
            }
            if !seen.insert(cluster.as_str()) {
                return Err(RegistrationError::DuplicateHostingCluster(cluster.clone()));
            }
        }
        Ok(Registration {
            name: raw.name,
            role: raw.role,
            description: raw.description,
            capabilities: raw.capabilities.into_iter().collect(),
            driver,
            hosting_clusters,
        })
    }

    /// Whether the manager declares `cap`.
    pub fn supports(&self, cap: Capability) -> bool {
        self.capabilities.contains(&cap)
    }
}

/// A `linux` k8s registration without `hosting_clusters`: the `linux.hosting_clusters` list,
/// else the same defaults as `sim`.
fn linux_hosting_clusters(driver: &DriverConfig) -> Vec<String> {
    let listed = match driver {
        DriverConfig::Linux(v) => v.get("hosting_clusters").and_then(|l| l.as_sequence()),
        _ => None,
    };
    match listed {
        Some(list) => list
            .iter()
            .filter_map(|c| c.as_str().map(String::from))
            .collect(),
        None => DEFAULT_SIM_HOSTING_CLUSTERS.map(String::from).to_vec(),
    }
}

pub(crate) fn exec_config(raw: RawExec, base_dir: &Path) -> Result<ExecConfig, RegistrationError> {
    if raw.command.trim().is_empty() {
        return Err(RegistrationError::EmptyCommand);
    }
    if raw.timeout_seconds == 0 {
        return Err(RegistrationError::ZeroTimeout);
    }
    let given = PathBuf::from(&raw.command);
    // A bare program name (`ansible-playbook`) that is not a file beside the registration is
    // looked up on PATH; anything else is a path relative to the registration's directory.
    let bare_on_path = given.components().count() == 1 && !base_dir.join(&given).exists();
    let command = if given.is_absolute() || bare_on_path {
        given
    } else {
        base_dir.join(given)
    };
    Ok(ExecConfig {
        command,
        args: raw.args,
        timeout_seconds: raw.timeout_seconds,
        env: raw.env,
        working_dir: base_dir.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Registration, RegistrationError> {
        Registration::from_yaml(text, Path::new("/etc/osac/managers"))
    }

    #[test]
    fn parses_sim_fabric() {
        let r = parse(
            "name: sim-fabric\nrole: fabric\ndescription: d\ncapabilities: [ipv4, ipv6, dual_stack]\ndriver: sim\n",
        )
        .unwrap();
        assert_eq!(r.role, Role::Fabric);
        assert!(r.supports(Capability::DualStack));
        assert!(!r.supports(Capability::DpuSupport));
        assert!(r.hosting_clusters.is_empty());
    }

    #[test]
    fn sim_k8s_gets_default_hosting_clusters() {
        let r = parse("name: k\nrole: k8s\ndriver: sim\n").unwrap();
        assert_eq!(r.hosting_clusters, vec!["hosting-a", "hosting-b"]);
    }

    #[test]
    fn exec_paths_resolve_against_the_file_directory() {
        let r = parse(
            "name: x\nrole: fabric\ndriver: exec\nexec:\n  command: demo/manager.py\n  args: [a]\n",
        )
        .unwrap();
        let DriverConfig::Exec(exec) = &r.driver else {
            panic!("not exec")
        };
        assert_eq!(
            exec.command,
            Path::new("/etc/osac/managers/demo/manager.py")
        );
        assert_eq!(exec.timeout_seconds, 30);
        let r = parse("name: x\nrole: fabric\ndriver: exec\nexec: {command: /bin/true}\n").unwrap();
        let DriverConfig::Exec(exec) = &r.driver else {
            panic!("not exec")
        };
        assert_eq!(exec.command, Path::new("/bin/true"));
    }

    #[test]
    fn rejects_bad_files() {
        let cases = [
            (
                "name: x\nrole: fabric\ndriver: sim\ncolour: red\n",
                "unknown field `colour`",
            ),
            (
                "name: x\nrole: router\ndriver: sim\n",
                "unknown variant `router`",
            ),
            ("name: X_Y\nrole: fabric\ndriver: sim\n", "not a DNS label"),
            (
                "name: x\nrole: fabric\ndriver: linux\nexec: {command: a}\n",
                "not valid for driver 'linux'",
            ),
            (
                "name: x\nrole: fabric\ndriver: netris\n",
                "unknown driver 'netris'",
            ),
            (
                "name: x\nrole: fabric\ndriver: exec\n",
                "needs an 'exec' section",
            ),
            (
                "name: x\nrole: fabric\ndriver: sim\nexec: {command: a}\n",
                "not valid for driver 'sim'",
            ),
            (
                "name: x\nrole: fabric\ndriver: sim\nhosting_clusters: [a]\n",
                "only valid for role k8s",
            ),
            (
                "name: x\nrole: k8s\ndriver: exec\nexec: {command: a}\n",
                "at least one entry",
            ),
            (
                "name: x\nrole: fabric\ndriver: exec\nexec: {command: a, timeout_seconds: 0}\n",
                "at least 1",
            ),
            (
                "name: x\nrole: fabric\ndriver: exec\nexec: {command: a, shell: true}\n",
                "unknown field `shell`",
            ),
            (
                "name: x\nrole: fabric\ncapabilities: [ipv5]\ndriver: sim\n",
                "unknown variant `ipv5`",
            ),
        ];
        for (text, want) in cases {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err:?} lacks {want:?}");
        }
    }

    #[test]
    fn parses_linux_with_its_settings() {
        let r = parse("name: l\nrole: fabric\ndriver: linux\nlinux: {mtu: 1400}\n").unwrap();
        let DriverConfig::Linux(v) = &r.driver else {
            panic!("not linux")
        };
        assert_eq!(v["mtu"].as_u64(), Some(1400));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["driver"], "linux");
        assert_eq!(v["linux"]["mtu"], 1400);
        let k = parse("name: k\nrole: k8s\ndriver: linux\n").unwrap();
        assert_eq!(k.hosting_clusters, vec!["hosting-a", "hosting-b"]);
        assert_eq!(k.driver, DriverConfig::Linux(serde_yaml_ng::Value::Null));
        let k =
            parse("name: k\nrole: k8s\ndriver: linux\nlinux: {hosting_clusters: [x]}\n").unwrap();
        assert_eq!(k.hosting_clusters, vec!["x"]);
    }

    #[test]
    fn serializes_for_listing() {
        let r = Registration::sim("sim-k8s", Role::K8s);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["driver"], "sim");
        assert_eq!(v["role"], "k8s");
        assert_eq!(v["hosting_clusters"][1], "hosting-b");
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns_label("a"));
        assert!(is_dns_label("sim-fabric-2"));
        assert!(!is_dns_label(""));
        assert!(!is_dns_label("-a"));
        assert!(!is_dns_label("a-"));
        assert!(!is_dns_label("A"));
        assert!(!is_dns_label(&"a".repeat(64)));
    }
}
