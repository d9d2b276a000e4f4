//! The rules of external addresses: inbound only by a READY ExternalIPAttachment, outbound
//! SNAT to the NAT gateway (else masquerade), hairpin inside a VN, and VN to VN through the
//! uplink.

use super::tests::*;
use super::*;

fn eip(id: &str, address: &str) -> pb::ExternalIp {
    pb::ExternalIp {
        id: id.into(),
        metadata: meta(id),
        spec: None,
        status: Some(pb::ExternalIpStatus {
            state: pb::ExternalIpState::Allocated as i32,
            address: address.into(),
            ..Default::default()
        }),
    }
}

fn attach(id: &str, eip: &str, vm: &str, target: &str, ready: bool) -> pb::ExternalIpAttachment {
    pb::ExternalIpAttachment {
        id: id.into(),
        metadata: meta(id),
        spec: Some(pb::ExternalIpAttachmentSpec {
            external_ip: eip.into(),
            compute_instance: vm.into(),
            ..Default::default()
        }),
        status: Some(pb::ExternalIpAttachmentStatus {
            state: if ready {
                pb::ExternalIpAttachmentState::Ready
            } else {
                pb::ExternalIpAttachmentState::Pending
            } as i32,
            message: if ready {
                String::new()
            } else {
                "waiting for the target".into()
            },
            external_ip_address: String::new(),
            target_ip: target.into(),
            target_name: vm.into(),
        }),
    }
}

fn natgw(id: &str, vn: &str, eip: &str, address: &str) -> pb::NatGateway {
    pb::NatGateway {
        id: id.into(),
        metadata: meta(id),
        spec: Some(pb::NatGatewaySpec {
            virtual_network: vn.into(),
            external_ip: eip.into(),
        }),
        status: Some(pb::NatGatewayStatus {
            state: pb::NatGatewayState::Ready as i32,
            message: String::new(),
            address: address.into(),
        }),
    }
}

/// `web` (VM, 10.0.1.5) attached at 203.0.113.10, allowing tcp 443 from anywhere and tcp 22
/// from 198.51.100.0/24; `client` (VM, wide open) in the same VN; `metal` (bare metal,
/// 10.0.2.8) attached at 203.0.113.11 allowing tcp 80 from 10.0.1.0/24 only; `far` (VM in VN
/// `other`, wide open); NAT gateway of `other` at 203.0.113.20.
fn exposed() -> Network {
    let mut n = base();
    n.security_groups = vec![
        sg(
            "web",
            "net",
            vec![
                rule(pb::Protocol::Tcp, 443, 0, "0.0.0.0/0"),
                rule(pb::Protocol::Tcp, 22, 0, "198.51.100.0/24"),
                rule(pb::Protocol::Tcp, 8443, 0, "10.0.1.1/32"),
                rule(pb::Protocol::Tcp, 9443, 0, "203.0.113.20/32"),
            ],
            vec![rule(pb::Protocol::Tcp, 443, 0, "0.0.0.0/0")],
        ),
        ingress_only("front", rule(pb::Protocol::Tcp, 80, 0, "10.0.1.0/24")),
        wide_open("any", "net"),
        wide_open("any-other", "other"),
    ];
    n.compute_instances = vec![
        vm("web", "a", "10.0.1.5", &["web"]),
        vm("client", "a", "10.0.1.6", &["any"]),
        vm("far", "o", "10.0.1.5", &["any-other"]),
    ];
    n.baremetal_instances = vec![bm("metal", "b", "10.0.2.8", &["front"])];
    n.external_ips = vec![
        eip("e-web", "203.0.113.10"),
        eip("e-metal", "203.0.113.11"),
        eip("e-nat", "203.0.113.20"),
        eip("e-idle", "203.0.113.30"),
    ];
    n.external_ip_attachments = vec![
        attach("a-web", "e-web", "web", "10.0.1.5", true),
        pb::ExternalIpAttachment {
            spec: Some(pb::ExternalIpAttachmentSpec {
                external_ip: "e-metal".into(),
                baremetal_instance: "metal".into(),
                ..Default::default()
            }),
            ..attach("a-metal", "e-metal", "", "10.0.2.8", true)
        },
    ];
    n.nat_gateways = vec![natgw("nat", "other", "e-nat", "203.0.113.20")];
    n
}

fn from_internet(to: End, port: u16) -> Question {
    tcp(End::Internet, to, port)
}

#[test]
fn the_internet_reaches_a_workload_through_its_attachment() {
    let e = explain(&exposed(), &from_internet(ci("web"), 443)).unwrap();
    assert_eq!(e.verdict, Verdict::Reachable, "{e:?}");
    let dnat = e.hops.iter().find(|h| h.kind == HopKind::Dnat).unwrap();
    assert_eq!(dnat.destination_address, "10.0.1.5");
    assert_eq!(
        e.deciding,
        "SecurityGroup 'web' ingress rule 1: tcp 443 from 0.0.0.0/0"
    );
}

#[test]
fn the_internet_matches_only_rules_for_every_address_but_a_client_address_is_exact() {
    let n = exposed();
    assert_eq!(
        explain(&n, &from_internet(ci("web"), 22)).unwrap().verdict,
        Verdict::Blocked
    );
    let client = tcp(addr("198.51.100.7"), ci("web"), 22);
    assert_eq!(explain(&n, &client).unwrap().verdict, Verdict::Reachable);
    let to_eip = tcp(addr("198.51.100.7"), addr("203.0.113.10"), 22);
    assert_eq!(explain(&n, &to_eip).unwrap().verdict, Verdict::Reachable);
}

#[test]
fn without_an_attachment_a_workload_is_not_reachable_from_the_internet() {
    let e = explain(&exposed(), &from_internet(ci("client"), 443)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
    assert_eq!(
        e.deciding,
        "no ExternalIPAttachment makes ComputeInstance 'client' reachable from the internet"
    );
}

#[test]
fn a_private_address_is_not_routed_from_outside() {
    let e = explain(
        &exposed(),
        &tcp(addr("198.51.100.7"), addr("10.0.1.6"), 443),
    )
    .unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
    assert!(
        e.deciding.contains("not routed from outside"),
        "{}",
        e.deciding
    );
}

#[test]
fn an_attachment_that_is_not_ready_blocks_and_is_named() {
    let mut n = exposed();
    n.external_ip_attachments[0] = attach("a-web", "e-web", "web", "", false);
    let e = explain(&n, &from_internet(ci("web"), 443)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
    assert!(
        e.deciding
            .starts_with("ExternalIPAttachment 'a-web' is PENDING"),
        "{}",
        e.deciding
    );
    assert_eq!(e.deciding_object.unwrap().name, "a-web");
}

#[test]
fn an_unattached_external_ip_and_a_nat_gateway_address_take_nothing_inbound() {
    let n = exposed();
    let e = explain(&n, &from_internet(addr("203.0.113.30"), 443)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
    assert!(e.deciding.contains("attached to nothing"), "{}", e.deciding);
    let e = explain(&n, &from_internet(addr("203.0.113.20"), 443)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
    assert_eq!(e.deciding_object.unwrap().kind, Kind::NatGateway);
}

#[test]
fn outbound_leaves_through_the_nat_gateway_else_masqueraded() {
    let n = exposed();
    let e = explain(&n, &tcp(ci("far"), End::Internet, 443)).unwrap();
    assert_eq!(e.verdict, Verdict::Reachable);
    let snat = e.hops.iter().find(|h| h.kind == HopKind::Snat).unwrap();
    assert_eq!(snat.source_address, "203.0.113.20");
    let e = explain(&n, &tcp(ci("client"), End::Internet, 443)).unwrap();
    let snat = e.hops.iter().find(|h| h.kind == HopKind::Snat).unwrap();
    assert_eq!(snat.source_address, "transit");
    let e = explain(&n, &tcp(ci("web"), addr("8.8.8.8"), 80)).unwrap();
    assert_eq!(
        e.verdict,
        Verdict::Blocked,
        "web's egress allows tcp 443 only"
    );
}

#[test]
fn another_vn_reaches_an_attachment_from_its_nat_gateway_address() {
    let n = exposed();
    let e = explain(&n, &tcp(ci("far"), addr("203.0.113.10"), 9443)).unwrap();
    assert_eq!(e.verdict, Verdict::Reachable, "{}", e.deciding);
    let e = explain(&n, &tcp(ci("far"), addr("203.0.113.10"), 8443)).unwrap();
    assert_eq!(e.verdict, Verdict::Blocked);
}

#[test]
fn hairpin_a_vm_target_sees_the_gateway_a_bare_metal_target_the_sender() {
    let n = exposed();
    // web allows 8443 from the gateway 10.0.1.1 only: the VM sees the masqueraded source.
    let e = explain(&n, &tcp(ci("client"), addr("203.0.113.10"), 8443)).unwrap();
    assert_eq!(e.verdict, Verdict::Reachable, "{}", e.deciding);
    // metal allows 80 from 10.0.1.0/24: the router filters before masquerading (sender seen).
    let e = explain(&n, &tcp(ci("client"), addr("203.0.113.11"), 80)).unwrap();
    assert_eq!(e.verdict, Verdict::Reachable, "{}", e.deciding);
    let e = explain(&n, &tcp(ci("far"), addr("203.0.113.11"), 80)).unwrap();
    assert_eq!(
        e.verdict,
        Verdict::Blocked,
        "from another VN the source is its NAT address"
    );
}

#[test]
fn hairpin_returns_through_an_overlay_link_never_through_a_switch_port() {
    let mut n = exposed();
    // A VM to its own ExternalIP: back out of its hosting cluster's overlay link, which
    // hairpins; it sees the gateway as the source, like any hairpinned VM.
    let e = explain(&n, &tcp(ci("web"), addr("203.0.113.10"), 443)).unwrap();
    assert_eq!(
        e.verdict,
        Verdict::Reachable,
        "self hairpin: {}",
        e.deciding
    );
    let snat = e.hops.iter().find(|h| h.kind == HopKind::Snat).unwrap();
    assert_eq!(snat.source_address, "10.0.1.1", "seen from the gateway");
    // A bare-metal server (wide open here) to its own ExternalIP: its own switch port,
    // which does not.
    n.baremetal_instances[0] = bm("metal", "b", "10.0.2.8", &["any"]);
    let e = explain(
        &n,
        &tcp(
            End::BareMetalInstance("metal".into()),
            addr("203.0.113.11"),
            80,
        ),
    )
    .unwrap();
    assert_eq!(e.verdict, Verdict::Blocked, "{}", e.deciding);
    assert!(e.deciding.contains("switch port"), "{}", e.deciding);
}

#[test]
fn a_vms_egress_sees_the_external_ip_a_bare_metals_the_dnat_target() {
    let mut n = exposed();
    n.security_groups.push(egress_only(
        "to-eip",
        rule(pb::Protocol::All, 0, 0, "203.0.113.0/24"),
    ));
    n.compute_instances
        .push(vm("v", "a", "10.0.1.40", &["to-eip"]));
    n.baremetal_instances
        .push(bm("b", "a", "10.0.1.41", &["to-eip"]));
    let e = explain(&n, &tcp(ci("v"), addr("203.0.113.10"), 443)).unwrap();
    assert_eq!(e.verdict, Verdict::Reachable, "{}", e.deciding);
    let e = explain(
        &n,
        &tcp(
            End::BareMetalInstance("b".into()),
            addr("203.0.113.10"),
            443,
        ),
    )
    .unwrap();
    assert_eq!(
        e.verdict,
        Verdict::Blocked,
        "egress sees 10.0.1.5 after the router's DNAT"
    );
}

#[test]
fn requests_are_checked_field_by_field() {
    use pb::reachability_endpoint::Endpoint;
    let end = |e: Endpoint| {
        Some(pb::ReachabilityEndpoint {
            endpoint: Some(e),
            ..Default::default()
        })
    };
    let ok = pb::ExplainReachabilityRequest {
        source: end(Endpoint::ComputeInstance("a".into())),
        destination: end(Endpoint::Internet(true)),
        protocol: pb::Protocol::Tcp as i32,
        port: 443,
        tenant: String::new(),
    };
    assert!(question_from_request(&ok).is_ok());
    let field = |r: pb::ExplainReachabilityRequest| question_from_request(&r).unwrap_err().field;
    assert_eq!(
        field(pb::ExplainReachabilityRequest {
            port: 0,
            ..ok.clone()
        }),
        "port"
    );
    assert_eq!(
        field(pb::ExplainReachabilityRequest {
            protocol: pb::Protocol::All as i32,
            ..ok.clone()
        }),
        "protocol"
    );
    assert_eq!(
        field(pb::ExplainReachabilityRequest {
            source: None,
            ..ok.clone()
        }),
        "source"
    );
    assert_eq!(
        field(pb::ExplainReachabilityRequest {
            destination: end(Endpoint::Address("x".into())),
            ..ok.clone()
        }),
        "destination.address"
    );
    assert_eq!(
        field(pb::ExplainReachabilityRequest {
            destination: end(Endpoint::Cluster("c".into())),
            ..ok.clone()
        }),
        "destination.cluster_endpoint"
    );
}
