//! Dev mode: the provider objects a fresh `osac server --dev` needs to be usable at once.

use osac_model::{Kind, Scope};
use serde_json::{Value, json};

use osac_api::auth::{Caller, Role};
use osac_api::error::{ApiResult, Code};
use osac_api::service::Service;

/// The default NetworkClass of dev mode (sim fabric + sim k8s).
pub fn default_class() -> Value {
    default_class_for("sim-fabric", "sim-k8s", "Default (simulated fabric)")
}

/// The default NetworkClass of dev mode on the given managers.
pub fn default_class_for(fabric_manager: &str, k8s_manager: &str, title: &str) -> Value {
    let rule = |proto: &str, port: Option<i32>, v4: bool| {
        let mut r = json!({"protocol": proto});
        if let Some(p) = port {
            r["port_from"] = json!(p);
            r["port_to"] = json!(p);
        }
        if v4 {
            r["ipv4_cidr"] = json!("0.0.0.0/0");
        } else {
            r["ipv6_cidr"] = json!("::/0");
        }
        r
    };
    let mut ingress = Vec::new();
    for v4 in [true, false] {
        ingress.push(rule("PROTOCOL_TCP", Some(22), v4));
        ingress.push(rule("PROTOCOL_TCP", Some(443), v4));
        ingress.push(rule("PROTOCOL_ICMP", None, v4));
    }
    json!({
        "metadata": {"name": "default"},
        "title": title,
        // Tenants read the description: it must not name the managers (backends stay hidden).
        "description": "Dev-mode class: tenant networks with hosting clusters",
        "fabric_manager": fabric_manager,
        "k8s_manager": k8s_manager,
        "is_default": true,
        "spec": {
            "defaults": {
                "virtual_network_ipv4_cidr": "10.0.0.0/16",
                "virtual_network_ipv6_cidr": "fd00::/48",
                "subnet_ipv4_cidr": "10.0.1.0/24",
                "subnet_ipv6_cidr": "fd00:0:0:1::/64",
                "ingress_rules": ingress,
                "egress_rules": [rule("PROTOCOL_ALL", None, true), rule("PROTOCOL_ALL", None, false)]
                // enable_nat_gateway unset: on (tenants get a default NAT gateway).
            },
            "vip_prefix_length": 28
        }
    })
}

/// Dev-mode inventory: bare-metal hosts per pool, all of type `bm-standard`.
pub const DEV_HOSTS: [(&str, usize); 2] = [("baremetal", 4), ("caas", 6)];

/// Interfaces of `bm-standard`, in order.
const DEV_INTERFACES: [&str; 4] = ["data-0", "data-1", "mgmt-0", "bmc-0"];

/// The dev hosts: `baremetal-0…3` and `caas-0…5`. MACs are deterministic and unique:
/// `0e:00:00:00:<host number>:<interface number>` (locally administered, unicast, and never
/// `02:…` like the controllers' generated VM MACs).
pub fn dev_hosts() -> Vec<(Kind, Value)> {
    let mut out = Vec::new();
    let mut n = 0usize;
    for (pool, count) in DEV_HOSTS {
        for i in 0..count {
            n += 1;
            let interfaces: Vec<Value> = DEV_INTERFACES
                .iter()
                .enumerate()
                .map(|(k, name)| json!({"name": name, "mac_address": format!("0e:00:00:00:{n:02x}:{k:02x}")}))
                .collect();
            out.push((
                Kind::Host,
                json!({
                    "metadata": {"name": format!("{pool}-{i}")},
                    "spec": {"host_type": "bm-standard", "interfaces": interfaces, "pool": pool}
                }),
            ));
        }
    }
    out
}

/// The dev class on the registered dev managers: linux when `--fabric linux`, ovn when
/// `--fabric ovn` (both managers of the pair registered), else sim.
fn dev_class(service: &Service) -> Value {
    use crate::dataplane::{LINUX_FABRIC, LINUX_K8S};
    use crate::ovn_dev::{OVN_FABRIC, OVN_K8S};
    let registered =
        |fabric, k8s| service.registry.get(fabric).is_some() && service.registry.get(k8s).is_some();
    if registered(LINUX_FABRIC, LINUX_K8S) {
        default_class_for(LINUX_FABRIC, LINUX_K8S, "Default (real dataplane)")
    } else if registered(OVN_FABRIC, OVN_K8S) {
        default_class_for(OVN_FABRIC, OVN_K8S, "Default (OVN)")
    } else {
        default_class()
    }
}

/// Creates the dev provider objects that do not exist yet.
pub async fn bootstrap(service: &Service) -> ApiResult<()> {
    let admin = Caller {
        subject: "dev-bootstrap".into(),
        tenant: None,
        role: Role::ProviderAdmin,
    };
    let objects = [
        (Kind::NetworkClass, dev_class(service)),
        (
            Kind::ExternalIpPool,
            json!({"metadata": {"name": "external-pool-1"}, "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["203.0.113.0/24"]}}),
        ),
        (
            Kind::HostType,
            json!({
                "metadata": {"name": "bm-standard"},
                "title": "Standard bare-metal server",
                "description": "Two fabric ports, one management port, one BMC",
                "interfaces": [
                    {"name": "data-0", "role": "fabric", "description": "first data port"},
                    {"name": "data-1", "role": "fabric", "description": "second data port"},
                    {"name": "mgmt-0", "role": "management", "description": "management port"},
                    {"name": "bmc-0", "role": "lifecycle", "description": "baseboard management controller"}
                ]
            }),
        ),
        (
            Kind::BareMetalTemplate,
            json!({
                "metadata": {"name": "bcm_h100"},
                "spec": {
                    "host_type": "bm-standard",
                    "title": "H100 bare-metal server",
                    "description": "A dev-mode bare-metal server on the standard host type",
                    "template_parameters": {"os_image": "rhel-9"}
                }
            }),
        ),
    ];
    let hosts = dev_hosts();
    for (kind, obj) in objects.into_iter().chain(hosts) {
        // Idempotent: an object of that name (from an earlier start) is left as it is.
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        if service
            .get(&admin, Scope::Provider, kind, name)
            .await
            .is_ok()
        {
            continue;
        }
        match service
            .create_json(&admin, Scope::Provider, kind, obj)
            .await
        {
            Ok(_) => {}
            Err(e) if e.code == Code::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The provider-admin token of dev mode: the one in `dev-credentials.json` (`admin_token`) if
/// it still authenticates as a provider admin, else a new one minted into the store.
pub async fn admin_token(service: &Service, credentials: &std::path::Path) -> ApiResult<String> {
    let previous = std::fs::read_to_string(credentials)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|v| v["admin_token"].as_str().map(str::to_string));
    if let Some(token) = previous
        && let Ok(caller) = service
            .auth
            .authenticate(Some(&format!("Bearer {token}")))
            .await
        && caller.is_provider()
    {
        return Ok(token);
    }
    let admin = Caller {
        subject: "dev-bootstrap".into(),
        tenant: None,
        role: Role::ProviderAdmin,
    };
    let minted = service
        .mint_token(
            &admin,
            osac_api::token_service::MintRequest {
                role: Role::ProviderAdmin.as_str().into(),
                subject: "dev-admin".into(),
                ..Default::default()
            },
        )
        .await?;
    Ok(minted.token)
}

/// Writes `dev-credentials.json`: created with mode 0600 (it holds the admin token), never
/// readable by others even for an instant.
pub fn write_credentials(path: &std::path::Path, credentials: &Value) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(credentials).map_err(std::io::Error::other)?;
    osac_api::auth::tokens::write_private(path, &text)
}
