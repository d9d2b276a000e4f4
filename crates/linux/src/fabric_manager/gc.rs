//! Garbage collection: removes our kernel state nobody owns. Only namespaces named with our
//! prefixes (and bridges, nft tables and dnsmasq processes inside them) are ever looked at.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::cmd;
use crate::error::LinuxError;
use crate::names::{self, HOSTING_NS_PREFIX, MACHINE_NS_PREFIX, ROUTER_NS_PREFIX};

/// What the store still knows; everything of ours outside it is garbage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnedSet {
    /// VirtualNetwork ids (router namespaces).
    pub virtual_networks: BTreeSet<String>,
    /// Subnet ids (bridges and dnsmasq in routers and hosting clusters).
    pub subnets: BTreeSet<String>,
    /// Machine keys (VM instance ids, inventory Host ids): machine namespaces.
    pub machines: BTreeSet<String>,
    /// Hosting cluster names (hosting namespaces).
    pub hosting_clusters: BTreeSet<String>,
}

/// What garbage collection removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcReport {
    /// Deleted namespaces.
    pub namespaces: Vec<String>,
    /// Deleted bridges, as `namespace/bridge`.
    pub bridges: Vec<String>,
    /// Killed dnsmasq processes (pids).
    pub processes: Vec<u32>,
    /// Deleted nft tables, as `namespace/family name`.
    #[serde(default)]
    pub tables: Vec<String>,
}

/// Which namespaces of `existing` are garbage for `owned` (pure, for tests): ours by prefix
/// and not derived from an owned id. `osac-ext`, `osac-park` and unknown `osac-` names stay.
pub fn garbage_namespaces(existing: &[String], owned: &OwnedSet) -> Vec<String> {
    let routers: BTreeSet<String> = owned
        .virtual_networks
        .iter()
        .map(|v| names::router_ns(v))
        .collect();
    let machines: BTreeSet<String> = owned
        .machines
        .iter()
        .map(|v| names::machine_ns(v))
        .collect();
    let hosting: BTreeSet<String> = owned
        .hosting_clusters
        .iter()
        .map(|v| names::hosting_ns(v))
        .collect();
    existing
        .iter()
        .filter(|ns| {
            (ns.starts_with(ROUTER_NS_PREFIX) && !routers.contains(*ns))
                || (ns.starts_with(MACHINE_NS_PREFIX) && !machines.contains(*ns))
                || (ns.starts_with(HOSTING_NS_PREFIX) && !hosting.contains(*ns))
        })
        .cloned()
        .collect()
}

/// Whether `name` looks like one of our subnet bridges (`b` + 12 hex).
fn is_subnet_bridge(name: &str) -> bool {
    name.len() == 13 && name.starts_with('b') && name[1..].chars().all(|c| c.is_ascii_hexdigit())
}

/// Which tables of an `nft list tables` listing are garbage (pure, for tests): named like a
/// VirtualNetwork's table (`osac-` + 12 hex, see [`names::vn_table`]) for a VN nobody owns.
/// Returns (family, name). The bridge table `osac`, other `osac…` names and foreign tables stay.
pub fn garbage_tables(listing: &str, owned: &OwnedSet) -> Vec<(String, String)> {
    let tables: BTreeSet<String> = owned
        .virtual_networks
        .iter()
        .map(|v| names::vn_table(v))
        .collect();
    listing
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            match (w.next(), w.next(), w.next(), w.next()) {
                (Some("table"), Some(family), Some(name), None) => {
                    Some((family.to_string(), name.to_string()))
                }
                _ => None,
            }
        })
        .filter(|(_, name)| is_vn_table(name) && !tables.contains(name))
        .collect()
}

/// Whether `name` looks like one of our per-VirtualNetwork tables (`osac-` + 12 hex).
fn is_vn_table(name: &str) -> bool {
    name.strip_prefix(names::PREFIX)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|h| h.len() == 12 && h.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Removes our namespaces, subnet/overlay bridges, VN nft tables and dnsmasq processes nobody
/// owns. Never touches anything without our prefix.
pub async fn gc(owned: &OwnedSet) -> Result<GcReport, LinuxError> {
    gc_among(owned, None).await
}

/// [`gc`] restricted to the namespaces in `scope` (when given): what a process sharing the
/// machine with other osac instances (tests running in parallel) may clean.
pub async fn gc_among(owned: &OwnedSet, scope: Option<&[String]>) -> Result<GcReport, LinuxError> {
    let mut report = GcReport::default();
    let mut existing = cmd::list_netns().await?;
    if let Some(scope) = scope {
        existing.retain(|ns| scope.contains(ns));
    }
    let scope_inodes: Option<BTreeSet<u64>> = scope.map(|s| {
        s.iter()
            .filter_map(|ns| std::fs::metadata(format!("/run/netns/{ns}")).ok())
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .collect()
    });
    let garbage = garbage_namespaces(&existing, owned);
    for ns in &garbage {
        cmd::delete_netns(ns).await?;
        report.namespaces.push(ns.clone());
    }
    let bridges: BTreeSet<String> = owned
        .subnets
        .iter()
        .map(|s| names::subnet_bridge(s))
        .collect();
    for ns in existing.iter().filter(|ns| !garbage.contains(ns)) {
        if !(ns.starts_with(ROUTER_NS_PREFIX) || ns.starts_with(HOSTING_NS_PREFIX)) {
            continue;
        }
        for link in cmd::links(ns).await? {
            if is_subnet_bridge(&link.ifname) && !bridges.contains(&link.ifname) {
                // Its VXLAN leg and ports go with it; the ports' machine ends die with the pair.
                for other in cmd::links(ns).await? {
                    if other.master.as_deref() == Some(link.ifname.as_str()) {
                        cmd::ip_ignore_missing(Some(ns), &["link", "del", &other.ifname]).await?;
                    }
                }
                cmd::ip_ignore_missing(Some(ns), &["link", "del", &link.ifname]).await?;
                report.bridges.push(format!("{ns}/{}", link.ifname));
            }
        }
        // A VN's table left in a router (hand edits, a crash between steps) or in a hosting
        // cluster (its VN deleted while the cluster's namespace was being rebuilt).
        let listing = cmd::in_ns(ns, "nft", &["list", "tables"], None).await?;
        for (family, name) in garbage_tables(&listing, owned) {
            let script = format!("delete table {family} {name}\n");
            match cmd::nft(ns, &script).await {
                Ok(()) => report.tables.push(format!("{ns}/{family} {name}")),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    report.processes = kill_orphan_dnsmasq(owned, scope_inodes.as_ref()).await;
    Ok(report)
}

/// Kills dnsmasq processes started with one of our configs (`…/dnsmasq/<hash>.conf`) for a
/// subnet nobody owns.
async fn kill_orphan_dnsmasq(owned: &OwnedSet, scope: Option<&BTreeSet<u64>>) -> Vec<u32> {
    let hashes: BTreeSet<String> = owned.subnets.iter().map(|s| names::short_hash(s)).collect();
    let mut killed = Vec::new();
    let Ok(mut dir) = tokio::fs::read_dir("/proc").await else {
        return killed;
    };
    while let Ok(Some(entry)) = dir.next_entry().await {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(raw) = tokio::fs::read(format!("/proc/{pid}/cmdline")).await else {
            continue;
        };
        let args: Vec<String> = raw
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args.first().is_some_and(|a| a.ends_with("dnsmasq")) {
            continue;
        }
        if let Some(scope) = scope {
            let ino = std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .unwrap_or(0);
            if !scope.contains(&ino) {
                continue;
            }
        }
        let Some(conf) = args.iter().find_map(|a| a.strip_prefix("--conf-file=")) else {
            continue;
        };
        let path = std::path::Path::new(conf);
        let in_our_dir = path
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "dnsmasq");
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let ours = in_our_dir && stem.len() == 12 && stem.chars().all(|c| c.is_ascii_hexdigit());
        if ours
            && !hashes.contains(stem)
            && cmd::run("kill", &[&pid.to_string()], None).await.is_ok()
        {
            killed.push(pid);
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_unowned_namespaces_are_garbage() {
        let owned = OwnedSet {
            virtual_networks: ["vn-1".to_string()].into(),
            machines: ["vm-1".to_string()].into(),
            hosting_clusters: ["hosting-a".to_string()].into(),
            ..OwnedSet::default()
        };
        let existing = vec![
            names::router_ns("vn-1"),
            names::router_ns("vn-2"),
            names::machine_ns("vm-1"),
            names::machine_ns("vm-2"),
            names::hosting_ns("hosting-a"),
            names::hosting_ns("hosting-z"),
            "osac-ext".to_string(),
            "osac-park".to_string(),
            "osac-something".to_string(),
            "default".to_string(),
            "router-1".to_string(),
        ];
        let g = garbage_namespaces(&existing, &owned);
        assert_eq!(
            g,
            vec![
                names::router_ns("vn-2"),
                names::machine_ns("vm-2"),
                names::hosting_ns("hosting-z")
            ]
        );
        assert!(is_subnet_bridge(&names::subnet_bridge("s")));
        assert!(!is_subnet_bridge("br0"));
    }

    #[test]
    fn only_unowned_vn_tables_are_garbage() {
        let owned = OwnedSet {
            virtual_networks: ["vn-1".to_string()].into(),
            ..OwnedSet::default()
        };
        let listing = format!(
            "table inet {}\ntable inet {}\ntable bridge osac\ntable inet osac-nat\n\
             table inet filter\ntable ip osac-0000deadbeef\n",
            names::vn_table("vn-1"),
            names::vn_table("vn-2"),
        );
        assert_eq!(
            garbage_tables(&listing, &owned),
            vec![
                ("inet".to_string(), names::vn_table("vn-2")),
                ("ip".to_string(), "osac-0000deadbeef".to_string()),
            ]
        );
    }
}
