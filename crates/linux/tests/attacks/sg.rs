//! Security groups apply to every packet of a port, whatever its addresses: a neighbour on
//! the same subnet tries a port the group does not allow (TCP 8080, UDP 8081) on the victim's
//! IPv4, global IPv6 and link-local addresses, and by IPv4 broadcast (subnet and limited) and
//! IPv6 multicast (all-nodes), against a VM (filtered in the hosting cluster) and a
//! bare-metal server (filtered in the router). The allowed port (TCP 22) answers on every
//! address, and a neighbour without groups receives the broadcasts (controls).
//!
//! Then egress: ports whose group lets out only TCP 22 send UDP to a neighbour's global and
//! link-local addresses, by broadcast and to all-nodes; the neighbour sees none of it.
//!
//! Stopped by: bridged ingress keyed by the output port's mark (`meta mark vmap @inport`,
//! marks set per port by the bridge table's `markout` chain); egress keyed by the sender's
//! MAC (`ether saddr vmap @egmac`). Mutation-checked: without the
//! `inport` rule, TCP 8080 opened on the link-local address of both victims and the UDP
//! broadcasts and multicasts reached them (the reported bypass).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use osac_backends::Protocol;
use osac_linux::probe;

use super::{Kind, World, leaked, marker, rule, ssh_only, tcp_answered};

#[tokio::test]
async fn security_groups_filter_link_local_broadcast_and_multicast_traffic() {
    if !super::common::ready().await {
        return;
    }
    let w = World::new(18).await;
    let (ingress, egress) = ssh_only();
    let web = w.security_group("web", "va", ingress, egress).await;
    let (evil, evil_bm) = w
        .vm_and_bm("evil", "evilbm", "a1", &w.open("a1").await)
        .await;
    let (vm, bm) = w.vm_and_bm("webvm", "webbm", "a1", &[web]).await;
    let open = w.machine("open", Kind::Vm, "a1", &w.open("a1").await).await;
    let mut problems = Vec::new();
    for (who, a) in [("vm", &evil), ("bm", &evil_bm)] {
        for (vname, v) in [("vm", &vm), ("bm", &bm)] {
            let addrs = [
                SocketAddr::new(IpAddr::V4(v.v4), 0),
                SocketAddr::new(IpAddr::V6(v.v6), 0),
                a.scoped(v.link_local, 0),
            ];
            for mut to in addrs {
                to.set_port(22);
                if !tcp_answered(&a.ns, to) {
                    problems.push(format!(
                        "{who}→{vname}: allowed tcp/22 on {to} got no answer"
                    ));
                }
                to.set_port(8080);
                if tcp_answered(&a.ns, to) {
                    problems.push(format!("{who}→{vname}: tcp/8080 on {to} answered"));
                }
            }
        }
    }
    let caps = [
        ("the VM with groups", vm.capture()),
        ("the bare metal with groups", bm.capture()),
    ];
    let control = open.capture();
    let mut attacks = Vec::new();
    for (who, a) in [("vm", &evil), ("bm", &evil_bm)] {
        let all_nodes: Ipv6Addr = "ff02::1".parse().unwrap();
        let targets: Vec<(&str, SocketAddr)> = vec![
            (
                "subnet-broadcast",
                SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 255)), 8081),
            ),
            (
                "limited-broadcast",
                SocketAddr::new(IpAddr::V4(Ipv4Addr::BROADCAST), 8081),
            ),
            ("all-nodes", a.scoped(all_nodes, 8081)),
            ("vm-link-local", a.scoped(vm.link_local, 8081)),
            ("bm-link-local", a.scoped(bm.link_local, 8081)),
        ];
        for (name, to) in targets {
            let attack = format!("{who}-udp-{name}");
            probe::udp_send(&a.ns, to, &marker(&attack)).unwrap();
            attacks.push(attack);
        }
    }
    let refs: Vec<_> = caps.iter().map(|(n, c)| (*n, c)).collect();
    let seen = leaked(&refs, &attacks);
    problems.extend(seen);
    for a in attacks.iter().filter(|a| !a.contains("link-local")) {
        if !control.contains(&marker(a)) {
            problems.push(format!(
                "control: {a} did not reach the neighbour without groups"
            ));
        }
    }

    // Egress: ports whose group lets out only TCP 22 send UDP by every kind of address; the
    // neighbour without groups (which got the broadcasts above) sees none of it.
    let ssh_out = vec![
        rule(Protocol::Tcp, Some((22, 22)), "0.0.0.0/0"),
        rule(Protocol::Tcp, Some((22, 22)), "::/0"),
    ];
    let quiet = w.security_group("quiet", "va", vec![], ssh_out).await;
    let (quiet_vm, quiet_bm) = w.vm_and_bm("quietvm", "quietbm", "a1", &[quiet]).await;
    let mut sent = Vec::new();
    for (who, a) in [("vm", &quiet_vm), ("bm", &quiet_bm)] {
        let targets: Vec<(&str, SocketAddr)> = vec![
            ("global", SocketAddr::new(IpAddr::V4(open.v4), 8081)),
            ("global6", SocketAddr::new(IpAddr::V6(open.v6), 8081)),
            ("link-local", a.scoped(open.link_local, 8081)),
            (
                "broadcast",
                SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 255)), 8081),
            ),
            ("all-nodes", a.scoped("ff02::1".parse().unwrap(), 8081)),
        ];
        for (name, to) in targets {
            let attack = format!("{who}-egress-{name}");
            let _ = probe::udp_send(&a.ns, to, &marker(&attack));
            sent.push(attack);
        }
    }
    problems.extend(leaked(
        &[("the neighbour (egress not allowed)", &control)],
        &sent,
    ));
    assert!(problems.is_empty(), "{problems:#?}");
    w.env.teardown().await;
}
