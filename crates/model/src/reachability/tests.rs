//! One test per rule of the explainer, each failing if its rule is removed. Fixture: tenant
//! with VN `net` (subnets `a` 10.0.1.0/24, `b` 10.0.2.0/24) and VN `other` (subnet `o`
//! 10.0.1.0/24, overlapping `a`).

use super::*;

pub fn meta(name: &str) -> Option<pb::Metadata> {
    Some(pb::Metadata {
        name: name.into(),
        ..Default::default()
    })
}

pub fn rule(p: pb::Protocol, from: i32, to: i32, v4: &str) -> pb::SecurityRule {
    pb::SecurityRule {
        protocol: p as i32,
        port_from: from,
        port_to: to,
        ipv4_cidr: v4.into(),
        ipv6_cidr: String::new(),
    }
}

/// A group that allows everything in and out over IPv4: how a tenant-admin opens a port.
pub fn wide_open(id: &str, vn: &str) -> pb::SecurityGroup {
    sg(
        id,
        vn,
        vec![rule(pb::Protocol::All, 0, 0, "0.0.0.0/0")],
        vec![rule(pb::Protocol::All, 0, 0, "0.0.0.0/0")],
    )
}

/// A group of VN `net` that lets `rule` in and nothing out.
pub fn ingress_only(id: &str, rule: pb::SecurityRule) -> pb::SecurityGroup {
    sg(id, "net", vec![rule], vec![])
}

/// A group of VN `net` that lets `rule` out and nothing in.
pub fn egress_only(id: &str, rule: pb::SecurityRule) -> pb::SecurityGroup {
    sg(id, "net", vec![], vec![rule])
}

pub fn sg(
    id: &str,
    vn: &str,
    ingress: Vec<pb::SecurityRule>,
    egress: Vec<pb::SecurityRule>,
) -> pb::SecurityGroup {
    pb::SecurityGroup {
        id: id.into(),
        metadata: meta(id),
        spec: Some(pb::SecurityGroupSpec {
            virtual_network: vn.into(),
            ingress,
            egress,
        }),
        status: None,
    }
}

/// The status of a workload's primary attachment: `interface` on `subnet` at `ip`.
fn primary_status(interface: &str, subnet: &str, ip: &str) -> pb::AttachmentStatus {
    pb::AttachmentStatus {
        interface: interface.into(),
        subnet_ref: subnet.into(),
        ip_address: ip.into(),
        primary: true,
        ..Default::default()
    }
}

/// A VM with one attachment.
pub fn vm(id: &str, subnet: &str, ip: &str, sgs: &[&str]) -> pb::ComputeInstance {
    pb::ComputeInstance {
        id: id.into(),
        metadata: meta(id),
        spec: Some(pb::ComputeInstanceSpec {
            compute_network_attachments: vec![pb::ComputeNetworkAttachment {
                subnet: subnet.into(),
                security_groups: sgs.iter().map(|s| s.to_string()).collect(),
                primary: true,
            }],
            ..Default::default()
        }),
        status: Some(pb::ComputeInstanceStatus {
            state: pb::ComputeInstanceState::Running as i32,
            compute_network_attachment_statuses: vec![primary_status("eth0", subnet, ip)],
            internal_ip_address: ip.into(),
            ..Default::default()
        }),
    }
}

pub fn bm(id: &str, subnet: &str, ip: &str, sgs: &[&str]) -> pb::BareMetalInstance {
    pb::BareMetalInstance {
        id: id.into(),
        metadata: meta(id),
        spec: Some(pb::BareMetalInstanceSpec {
            network_attachments: vec![pb::BareMetalNetworkAttachment {
                subnet: subnet.into(),
                security_groups: sgs.iter().map(|s| s.to_string()).collect(),
                interface: "data-0".into(),
                primary: true,
            }],
            ..Default::default()
        }),
        status: Some(pb::BareMetalInstanceStatus {
            state: pb::BareMetalInstanceState::Running as i32,
            network_attachment_statuses: vec![primary_status("data-0", subnet, ip)],
            ..Default::default()
        }),
    }
}

fn subnet(id: &str, vn: &str, cidr: &str, gw: &str) -> pb::Subnet {
    pb::Subnet {
        id: id.into(),
        metadata: meta(id),
        spec: Some(pb::SubnetSpec {
            virtual_network: vn.into(),
            ipv4_cidr: cidr.into(),
            ipv6_cidr: String::new(),
        }),
        status: Some(pb::SubnetStatus {
            state: pb::SubnetState::Ready as i32,
            ipv4_gateway: gw.into(),
            ..Default::default()
        }),
    }
}

fn vn(id: &str) -> pb::VirtualNetwork {
    pb::VirtualNetwork {
        id: id.into(),
        metadata: meta(id),
        ..Default::default()
    }
}

/// The two-VN fixture without workloads.
pub fn base() -> Network {
    Network {
        virtual_networks: vec![vn("net"), vn("other")],
        subnets: vec![
            subnet("a", "net", "10.0.1.0/24", "10.0.1.1"),
            subnet("b", "net", "10.0.2.0/24", "10.0.2.1"),
            subnet("o", "other", "10.0.1.0/24", "10.0.1.1"),
        ],
        ..Default::default()
    }
}

pub fn tcp(from: End, to: End, port: u16) -> Question {
    Question {
        source: from,
        destination: to,
        protocol: Protocol::Tcp,
        port,
    }
}

pub fn ci(n: &str) -> End {
    End::ComputeInstance(n.into())
}

pub fn addr(a: &str) -> End {
    End::Address {
        address: a.parse().unwrap(),
        virtual_network: None,
    }
}

fn web_db() -> Network {
    let mut n = base();
    n.security_groups = vec![
        sg(
            "web",
            "net",
            vec![
                rule(pb::Protocol::Udp, 53, 0, "0.0.0.0/0"),
                rule(pb::Protocol::Tcp, 443, 0, "0.0.0.0/0"),
            ],
            vec![rule(pb::Protocol::All, 0, 0, "0.0.0.0/0")],
        ),
        ingress_only("db", rule(pb::Protocol::Tcp, 5432, 5433, "10.0.1.0/24")),
        wide_open("any", "net"),
    ];
    n.compute_instances = vec![
        vm("vm1", "a", "10.0.1.5", &["web"]),
        vm("vm2", "a", "10.0.1.6", &["web"]),
        vm("db1", "b", "10.0.2.7", &["db"]),
        vm("open", "a", "10.0.1.9", &["any"]),
    ];
    n
}

#[test]
fn an_ingress_rule_allows_and_is_named() {
    let e = explain(&web_db(), &tcp(ci("vm1"), ci("vm2"), 443)).unwrap();
    assert_eq!(e.verdict, Verdict::Reachable);
    assert_eq!(
        e.deciding,
        "SecurityGroup 'web' ingress rule 2: tcp 443 from 0.0.0.0/0"
    );
    assert_eq!(e.deciding_rule_index, 2);
    assert_eq!(e.deciding_object.unwrap().name, "web");
    let kinds: Vec<_> = e.hops.iter().map(|h| h.kind).collect();
    assert_eq!(kinds, [HopKind::Port, HopKind::Subnet, HopKind::Port]);
    assert_eq!(e.hops[0].source_address, "10.0.1.5");
    assert_eq!(e.hops[0].destination_address, "10.0.1.6");
}

#[test]
fn no_ingress_rule_blocks_naming_the_groups() {
    let e = explain(&web_db(), &tcp(ci("vm1"), ci("vm2"), 8080)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
    assert_eq!(
        e.deciding,
        "no ingress rule of SecurityGroups 'web' allows tcp/8080 from 10.0.1.5"
    );
}

#[test]
fn port_ranges_and_peers_are_matched() {
    let n = web_db();
    assert_eq!(
        explain(&n, &tcp(ci("vm1"), ci("db1"), 5433))
            .unwrap()
            .verdict,
        Verdict::Reachable
    );
    assert_eq!(
        explain(&n, &tcp(ci("vm1"), ci("db1"), 5434))
            .unwrap()
            .verdict,
        Verdict::Blocked
    );
    let mut far = n.clone();
    far.compute_instances.push(vm("far", "b", "10.0.2.9", &[]));
    let e = explain(&far, &tcp(ci("far"), ci("db1"), 5432)).unwrap();
    assert_eq!(
        e.verdict,
        Verdict::Blocked,
        "10.0.2.9 is outside the rule's 10.0.1.0/24"
    );
}

#[test]
fn egress_of_the_source_applies_too() {
    let mut n = web_db();
    n.security_groups.push(egress_only(
        "mute",
        rule(pb::Protocol::Udp, 0, 0, "0.0.0.0/0"),
    ));
    n.compute_instances
        .push(vm("quiet", "a", "10.0.1.10", &["mute"]));
    let e = explain(&n, &tcp(ci("quiet"), ci("open"), 22)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
    assert_eq!(
        e.deciding,
        "no egress rule of SecurityGroups 'mute' allows tcp/22 to 10.0.1.9"
    );
}

#[test]
fn ports_without_groups_are_closed_both_ways() {
    let mut n = web_db();
    n.compute_instances.push(vm("bare", "b", "10.0.2.20", &[]));
    let e = explain(&n, &tcp(ci("open"), ci("bare"), 9999)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
    assert!(
        e.deciding.starts_with(
            "ComputeInstance 'bare' eth0 has no security groups: a port without groups is closed"
        ),
        "{}",
        e.deciding
    );
    assert!(
        e.deciding.ends_with("so no ingress tcp/9999 passes"),
        "{}",
        e.deciding
    );
    assert_eq!(e.deciding_object.unwrap().name, "bare");
    let e = explain(&n, &tcp(ci("bare"), ci("open"), 22)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
    assert!(
        e.deciding.ends_with("so no egress tcp/22 passes"),
        "{}",
        e.deciding
    );
}

#[test]
fn several_groups_are_a_union() {
    let mut n = web_db();
    n.compute_instances
        .push(vm("both", "a", "10.0.1.11", &["web", "db"]));
    let e = explain(&n, &tcp(ci("vm1"), ci("both"), 5432)).unwrap();
    assert_eq!(e.verdict, Verdict::Reachable);
    assert_eq!(e.deciding_object.unwrap().name, "db");
}

#[test]
fn subnets_of_a_vn_are_routed_by_its_router() {
    let e = explain(&web_db(), &tcp(ci("vm1"), ci("db1"), 5432)).unwrap();
    assert_eq!(e.verdict, Verdict::Reachable);
    assert!(e.hops.iter().any(|h| h.kind == HopKind::Router));
}

#[test]
fn different_vns_are_isolated() {
    let mut n = web_db();
    n.compute_instances
        .push(vm("stranger", "o", "10.0.1.50", &[]));
    let e = explain(&n, &tcp(ci("vm1"), ci("stranger"), 443)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
    assert!(
        e.deciding.starts_with("different VirtualNetworks"),
        "{}",
        e.deciding
    );
    assert_eq!(e.deciding_object.unwrap().name, "other");
}

#[test]
fn an_overlapping_address_resolves_in_the_sources_vn_first() {
    let mut n = web_db();
    n.compute_instances.push(vm("twin", "o", "10.0.1.6", &[]));
    let e = explain(&n, &tcp(ci("vm1"), addr("10.0.1.6"), 443)).unwrap();
    assert_eq!(e.hops.last().unwrap().object.as_ref().unwrap().name, "vm2");
    let other = End::Address {
        address: "10.0.1.6".parse().unwrap(),
        virtual_network: Some("other".into()),
    };
    let e = explain(&n, &tcp(ci("vm1"), other, 443)).unwrap();
    assert!(e.deciding.starts_with("different VirtualNetworks"));
}

#[test]
fn a_workload_that_is_not_running_is_blocked() {
    let mut n = web_db();
    n.compute_instances[1].status.as_mut().unwrap().state =
        pb::ComputeInstanceState::Stopped as i32;
    let e = explain(&n, &tcp(ci("vm1"), ci("vm2"), 443)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
    assert!(
        e.deciding
            .contains("COMPUTE_INSTANCE_STATE_STOPPED, not RUNNING"),
        "{}",
        e.deciding
    );
    let e = explain(&n, &tcp(ci("vm2"), ci("vm1"), 443)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
}

#[test]
fn the_gateway_answers_icmp_echo_on_its_own_subnet_only() {
    let n = web_db();
    let ping = |from: &str, to: &str| Question {
        protocol: Protocol::Icmp,
        port: 0,
        ..tcp(ci(from), addr(to), 0)
    };
    assert_eq!(
        explain(&n, &ping("open", "10.0.1.1")).unwrap().verdict,
        Verdict::Reachable
    );
    let e = explain(&n, &ping("open", "10.0.2.1")).unwrap();
    assert_eq!(
        e.verdict,
        Verdict::Blocked,
        "another subnet's gateway address"
    );
    let e = explain(&n, &tcp(ci("open"), addr("10.0.1.1"), 22)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked, "the gateway answers ICMP only");
}

#[test]
fn a_vms_egress_groups_apply_to_the_gateway_but_not_a_bare_metal_ones() {
    let mut n = web_db();
    n.security_groups.push(sg("mute", "net", vec![], vec![]));
    n.compute_instances
        .push(vm("quiet", "a", "10.0.1.10", &["mute"]));
    n.baremetal_instances
        .push(bm("metal", "a", "10.0.1.12", &["mute"]));
    let ping = |from: End| Question {
        protocol: Protocol::Icmp,
        port: 0,
        ..tcp(from, addr("10.0.1.1"), 0)
    };
    assert_eq!(
        explain(&n, &ping(ci("quiet"))).unwrap().verdict,
        Verdict::Blocked
    );
    let e = explain(&n, &ping(End::BareMetalInstance("metal".into()))).unwrap();
    assert_eq!(e.verdict, Verdict::Reachable);
}

#[test]
fn icmp_rules_match_icmp_and_all_rules_match_everything() {
    let mut n = base();
    n.security_groups = vec![
        ingress_only("icmp", rule(pb::Protocol::Icmp, 0, 0, "10.0.0.0/8")),
        ingress_only("all", rule(pb::Protocol::All, 0, 0, "10.0.1.5/32")),
        wide_open("any", "net"),
    ];
    n.compute_instances = vec![
        vm("src", "a", "10.0.1.5", &["any"]),
        vm("p", "a", "10.0.1.6", &["icmp"]),
        vm("q", "a", "10.0.1.7", &["all"]),
    ];
    let ping = |to: &str| Question {
        protocol: Protocol::Icmp,
        port: 0,
        ..tcp(ci("src"), ci(to), 0)
    };
    assert_eq!(explain(&n, &ping("p")).unwrap().verdict, Verdict::Reachable);
    assert_eq!(
        explain(&n, &tcp(ci("src"), ci("p"), 80)).unwrap().verdict,
        Verdict::Blocked
    );
    assert_eq!(
        explain(&n, &tcp(ci("src"), ci("q"), 80)).unwrap().verdict,
        Verdict::Reachable
    );
    let udp = Question {
        protocol: Protocol::Udp,
        ..tcp(ci("src"), ci("q"), 53)
    };
    assert_eq!(explain(&n, &udp).unwrap().verdict, Verdict::Reachable);
}

#[test]
fn ipv6_rules_never_match_ipv4() {
    let mut n = base();
    let mut v6 = rule(pb::Protocol::All, 0, 0, "");
    v6.ipv6_cidr = "::/0".into();
    n.security_groups = vec![ingress_only("six", v6)];
    n.compute_instances = vec![
        vm("src", "a", "10.0.1.5", &[]),
        vm("dst", "a", "10.0.1.6", &["six"]),
    ];
    assert_eq!(
        explain(&n, &tcp(ci("src"), ci("dst"), 80)).unwrap().verdict,
        Verdict::Blocked
    );
}

#[test]
fn unknown_objects_are_not_found() {
    let err = explain(&web_db(), &tcp(ci("vm1"), ci("ghost"), 443)).unwrap_err();
    assert!(
        matches!(err, ExplainError::NotFound { ref field, .. } if field == "destination.compute_instance")
    );
}

#[test]
fn a_rule_of_a_missing_group_allows_nothing_and_a_tcp_port_is_required() {
    let mut n = web_db();
    n.compute_instances
        .push(vm("lost", "a", "10.0.1.20", &["gone"]));
    assert_eq!(
        explain(&n, &tcp(ci("vm1"), ci("lost"), 443))
            .unwrap()
            .verdict,
        Verdict::Blocked
    );
    assert!(explain(&n, &tcp(ci("vm1"), ci("vm2"), 0)).is_err());
}
