//! The infrastructure namespaces themselves: which of their interfaces carry addresses and
//! take router advertisements (an inventory), and whether an address that appears on a
//! tenant-facing device of a hosting cluster anyway — left by an older version or added by
//! hand — still answers nothing (the second layer).
//!
//! Stopped by: `kernel::INFRA_SYSCTLS` (no IPv6 on devices unless `kernel::set_ipv6` turns it
//! on; no RAs, no redirects) and the `inet osac-guard` table of hosting clusters and parking
//! (`render::l2_guard_table`: input and output only on loopback and the underlay).
//! Mutation-checked: with `net.ipv6.conf.default.disable_ipv6=0`, the inventory listed the
//! link-local addresses of overlay bridges, VXLAN devices and switch ends; without
//! `accept_ra=0`, the hosting clusters' and parking's interfaces accepted RAs; with the
//! guard's policy `accept`, the address added to the overlay bridge answered the VM's ping
//! and its link-local address took the VXLAN datagram into tenant B's subnet. (Either layer
//! alone stops the reported attack: `encap.rs` fails only with both removed.)

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use osac_linux::probe::{self, forge};
use osac_linux::{kernel, names};

use super::common::{sh, sh_out};
use super::encap::{inner, tunnel};
use super::{Kind, World, leaked, pings};

/// (interface, address) pairs of a namespace, loopback left out.
async fn addressed(ns: &str) -> Vec<(String, IpAddr)> {
    let out = sh_out(ns, &["ip", "-j", "addr", "show"]).await;
    let links: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    let mut found = Vec::new();
    for link in links.as_array().into_iter().flatten() {
        let ifname = link["ifname"].as_str().unwrap_or_default().to_string();
        if ifname == "lo" {
            continue;
        }
        for a in link["addr_info"].as_array().into_iter().flatten() {
            if let Some(ip) = a["local"].as_str().and_then(|s| s.parse().ok()) {
                found.push((ifname.clone(), ip));
            }
        }
    }
    found
}

/// Interfaces of a namespace (loopback left out).
async fn interfaces(ns: &str) -> Vec<String> {
    let out = sh_out(ns, &["ip", "-j", "link", "show"]).await;
    let links: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    links
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["ifname"].as_str().map(String::from))
        .filter(|n| n != "lo")
        .collect()
}

/// One sysctl's value inside a namespace.
async fn sysctl(ns: &str, key: &str) -> String {
    sh_out(ns, &["sysctl", "-n", key]).await.trim().to_string()
}

#[tokio::test]
async fn infrastructure_interfaces_hold_no_tenant_facing_address_and_take_no_router_advertisements()
{
    if !super::common::ready().await {
        return;
    }
    let w = World::new(21).await;
    kernel::ensure_park().await.unwrap();
    let (evil, evil_bm) = w
        .vm_and_bm("evil", "evilbm", "a1", &w.open("a1").await)
        .await;
    let vb = w.machine("vb", Kind::Vm, "b1", &w.open("b1").await).await;
    let hosting = names::hosting_ns(&w.hc);
    let routers = [names::router_ns(&w.id("va")), names::router_ns(&w.id("vb"))];
    // a1 and b1 are dual-stack: their bridges hold the gateways (and a link-local address).
    let gateways = [
        names::subnet_bridge(&w.id("a1")),
        names::subnet_bridge(&w.id("a2")),
        names::subnet_bridge(&w.id("b1")),
    ];
    let mut problems = Vec::new();
    let mut namespaces: Vec<(String, Vec<String>)> = routers
        .iter()
        .map(|r| {
            let mut ok = vec![names::UPLINK_IF.to_string(), names::UNDERLAY_IF.to_string()];
            ok.extend(gateways.iter().cloned());
            (r.clone(), ok)
        })
        .collect();
    for hc in w.k8s.hosting_clusters() {
        namespaces.push((names::hosting_ns(hc), vec![names::UNDERLAY_IF.to_string()]));
    }
    namespaces.push((names::PARK_NS.to_string(), vec![]));
    for (ns, may_have_addresses) in &namespaces {
        for (ifname, ip) in addressed(ns).await {
            if !may_have_addresses.contains(&ifname) {
                problems.push(format!("{ns}/{ifname} has address {ip}"));
            }
        }
        for ifname in interfaces(ns).await {
            let off = sysctl(ns, &format!("net.ipv6.conf.{ifname}.disable_ipv6")).await == "1";
            let ra = sysctl(ns, &format!("net.ipv6.conf.{ifname}.accept_ra")).await;
            let forwarding = sysctl(ns, &format!("net.ipv6.conf.{ifname}.forwarding")).await;
            let redirects = sysctl(ns, &format!("net.ipv6.conf.{ifname}.accept_redirects")).await;
            // A forwarding interface takes RAs only with accept_ra=2; otherwise with 1 or 2.
            let takes_ra = if forwarding == "1" {
                ra == "2"
            } else {
                ra != "0"
            };
            if !off && takes_ra {
                problems.push(format!("{ns}/{ifname} accepts router advertisements"));
            }
            if !off && forwarding != "1" && redirects != "0" {
                problems.push(format!("{ns}/{ifname} accepts redirects"));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");

    // Second layer: an address on the hosting cluster's overlay bridge of a1 answers nothing.
    let bridge = names::subnet_bridge(&w.id("a1"));
    let leaked_v4 = Ipv4Addr::new(10, 0, 1, 250);
    assert!(
        sh(
            &hosting,
            &[
                "ip",
                "addr",
                "add",
                &format!("{leaked_v4}/24"),
                "dev",
                &bridge
            ]
        )
        .await
    );
    assert!(
        sh(
            &hosting,
            &[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{bridge}.disable_ipv6=0")
            ]
        )
        .await
    );
    let mut bridge_ll = None;
    for _ in 0..50 {
        bridge_ll = probe::capture::link_local_of(&hosting, &bridge);
        if bridge_ll.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let bridge_ll: Ipv6Addr = bridge_ll.expect("the bridge got a link-local address");
    let victim = vb.capture();
    let mut attacks = Vec::new();
    for (who, m) in [("vm", &evil), ("bm", &evil_bm)] {
        if pings(&m.ns, IpAddr::V4(leaked_v4)) {
            problems.push(format!(
                "{who}: the overlay bridge's {leaked_v4} answered echo"
            ));
        }
        let ok = std::process::Command::new("ip")
            .args([
                "netns", "exec", &m.ns, "ping", "-c1", "-W1", "-I", &m.ifname,
            ])
            .arg(bridge_ll.to_string())
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            problems.push(format!(
                "{who}: the overlay bridge's {bridge_ll} answered echo"
            ));
        }
        let attack = format!("{who}-leaked-address-vxlan");
        let payload = tunnel(forge::VXLAN_PORT, w.segment("b1"), &inner(&attack));
        let _ = probe::udp_send(&m.ns, m.scoped(bridge_ll, forge::VXLAN_PORT), &payload);
        let _ = probe::udp_send(
            &m.ns,
            SocketAddr::new(IpAddr::V4(leaked_v4), forge::VXLAN_PORT),
            &payload,
        );
        attacks.push(attack);
    }
    problems.extend(leaked(&[("tenant B's VM", &victim)], &attacks));
    assert!(problems.is_empty(), "{problems:#?}");
    w.env.teardown().await;
}
