//! Sim-only behaviour: persistence, failure injection, validation, tables.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use osac_backends::sim::PortLocation;
use osac_backends::*;

type Fabric = Arc<dyn FabricManager>;

async fn setup() -> (MemorySimState, Arc<SimFabric>, Fabric) {
    let store = MemorySimState::new();
    let fabric = SimFabric::open(Arc::new(store.clone())).await.unwrap();
    let client = client(&fabric);
    (store, fabric, client)
}

fn client(fabric: &Arc<SimFabric>) -> Fabric {
    Arc::new(SimManager::fabric(Registration::sim("sim", Role::Fabric), fabric.clone()).unwrap())
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

async fn vn(c: &Fabric, id: &str, v4: &str) {
    c.create_virtual_network(&CreateVirtualNetworkRequest {
        virtual_network_id: id.into(),
        tenant: "t".into(),
        ipv4_cidr: Some(v4.parse().unwrap()),
        ipv6_cidr: Some("fd00::/48".parse().unwrap()),
    })
    .await
    .unwrap();
}

fn subnet_req(id: &str, vn: &str, v4: &str, vip: Option<&str>) -> CreateSubnetRequest {
    CreateSubnetRequest {
        subnet_id: id.into(),
        virtual_network_id: vn.into(),
        ipv4_cidr: Some(v4.parse().unwrap()),
        ipv6_cidr: None,
        vip_cidr: vip.map(|v| v.parse().unwrap()),
    }
}

fn attach_req(
    id: &str,
    iface: &str,
    mac: &str,
    subnet: &str,
    vn: &str,
) -> CreateNetworkAttachmentRequest {
    CreateNetworkAttachmentRequest {
        attachment_id: id.into(),
        host: "host-1".into(),
        interface: iface.into(),
        mac_address: mac.into(),
        subnet_id: subnet.into(),
        virtual_network_id: vn.into(),
        security_groups: vec![],
        primary: true,
        allowed_addresses: vec![],
    }
}

#[tokio::test]
async fn allowed_addresses_come_from_the_vip_block_and_are_replaced() {
    let (_store, fabric, c) = setup().await;
    vn(&c, "vn", "10.0.0.0/16").await;
    c.create_subnet(&subnet_req("s", "vn", "10.0.1.0/24", Some("10.0.1.240/28")))
        .await
        .unwrap();
    let mut na = attach_req("a", "if0", "02:00:00:00:00:01", "s", "vn");
    let port = c.create_network_attachment(&na).await.unwrap();
    na.allowed_addresses = vec![ip("10.0.1.242"), ip("10.0.1.241"), ip("10.0.1.242")];
    assert_eq!(c.create_network_attachment(&na).await.unwrap(), port);
    let rec = fabric.network_attachment("a").await.unwrap();
    assert_eq!(rec.allowed_addresses, [ip("10.0.1.241"), ip("10.0.1.242")]);
    // Outside the VIP block (e.g. another port's address): refused, nothing changes.
    na.allowed_addresses = vec![ip("10.0.1.5")];
    is_permanent(
        c.create_network_attachment(&na).await,
        "not inside the VIP block",
    );
    assert_eq!(
        fabric
            .network_attachment("a")
            .await
            .unwrap()
            .allowed_addresses
            .len(),
        2
    );
    // The list is the desired state: an empty one clears it.
    na.allowed_addresses = vec![];
    c.create_network_attachment(&na).await.unwrap();
    assert!(
        fabric
            .network_attachment("a")
            .await
            .unwrap()
            .allowed_addresses
            .is_empty()
    );
}

fn eip_req(id: &str, cidrs: &[&str]) -> AllocateExternalIpRequest {
    AllocateExternalIpRequest {
        external_ip_id: id.into(),
        pool_id: "pool".into(),
        cidrs: cidrs.iter().map(|c| c.parse().unwrap()).collect(),
    }
}

/// Allocates ExternalIP `id` from the pool `pool` with `cidrs`; returns its address.
async fn allocated_address(c: &Fabric, id: &str, cidrs: &[&str]) -> IpAddr {
    c.allocate_external_ip(&eip_req(id, cidrs))
        .await
        .unwrap()
        .address
}

fn is_permanent<T: std::fmt::Debug>(r: Result<T, OpError>, needle: &str) {
    match r {
        // Our own messages (tenant-visible) and backend detail (a malformed response) alike.
        Err(e) if !e.is_transient() => {
            assert!(e.message().contains(needle), "{e:?} lacks {needle:?}")
        }
        other => panic!("expected permanent error containing {needle:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn state_survives_reopen() {
    let (store, fabric, c) = setup().await;
    vn(&c, "vn", "10.0.0.0/16").await;
    let s1 = c
        .create_subnet(&subnet_req("s1", "vn", "10.0.1.0/24", None))
        .await
        .unwrap();
    let s2 = c
        .create_subnet(&subnet_req("s2", "vn", "10.0.2.0/24", None))
        .await
        .unwrap();
    c.apply_security_group(&ApplySecurityGroupRequest {
        security_group_id: "sg".into(),
        virtual_network_id: "vn".into(),
        ingress: vec![SecurityRule {
            protocol: Protocol::Tcp,
            port_from: Some(443),
            port_to: Some(443),
            cidr: "0.0.0.0/0".parse().unwrap(),
        }],
        egress: vec![],
    })
    .await
    .unwrap();
    let a = allocated_address(&c, "e1", &["203.0.113.0/24"]).await;
    let b = allocated_address(&c, "e2", &["203.0.113.0/24"]).await;
    let mut na = attach_req("na", "data-0", "02:00:00:00:00:01", "s1", "vn");
    na.security_groups = vec!["sg".into()];
    let port = c.create_network_attachment(&na).await.unwrap();
    c.create_external_ip_attachment(&CreateExternalIpAttachmentRequest {
        attachment_id: "dnat".into(),
        virtual_network_id: "vn".into(),
        external_address: a,
        target_ip: port.ipv4_address.unwrap(),
    })
    .await
    .unwrap();
    c.create_nat_gateway(&CreateNatGatewayRequest {
        nat_gateway_id: "nat".into(),
        virtual_network_id: "vn".into(),
        external_address: b,
        source_cidrs: vec!["10.0.0.0/16".parse().unwrap()],
    })
    .await
    .unwrap();
    // The highest segment id is deleted before the restart: it must not be handed out again.
    c.delete_subnet(&DeleteSubnetRequest {
        subnet_id: "s2".into(),
        virtual_network_id: "vn".into(),
    })
    .await
    .unwrap();
    let (dnat, snat, eips) = (
        fabric.dnat_rules().await,
        fabric.snat_rules().await,
        fabric.external_addresses().await,
    );
    drop(c);
    drop(fabric);

    let fabric = SimFabric::open(Arc::new(store.clone())).await.unwrap();
    let c = client(&fabric);
    assert_eq!(fabric.segment("s1").await, Some(s1.segment_id));
    assert_eq!(
        c.create_subnet(&subnet_req("s1", "vn", "10.0.1.0/24", None))
            .await
            .unwrap(),
        s1
    );
    let s3 = c
        .create_subnet(&subnet_req("s3", "vn", "10.0.3.0/24", None))
        .await
        .unwrap();
    assert!(
        s3.segment_id > s2.segment_id,
        "{s3:?} reuses a segment id <= {s2:?}"
    );
    assert_eq!(fabric.dnat_rules().await, dnat);
    assert_eq!(fabric.snat_rules().await, snat);
    assert_eq!(fabric.external_addresses().await, eips);
    assert_eq!(fabric.security_group("sg").await.unwrap().ingress.len(), 1);
    assert_eq!(
        fabric.lease("s1", "02:00:00:00:00:01").await,
        Some(port.clone())
    );
    assert_eq!(allocated_address(&c, "e1", &["203.0.113.0/24"]).await, a);
    assert_eq!(c.create_network_attachment(&na).await.unwrap(), port);
    // Addresses in use are still known after the restart.
    let other = c
        .create_network_attachment(&attach_req(
            "na2",
            "data-1",
            "02:00:00:00:00:02",
            "s1",
            "vn",
        ))
        .await
        .unwrap();
    assert_ne!(other.ipv4_address, port.ipv4_address);
    is_permanent(
        c.create_subnet(&subnet_req("s4", "vn", "10.0.1.128/25", None))
            .await,
        "overlaps subnet 's1'",
    );
    assert!(store.len("sim-fabric") > 0);
}

#[tokio::test]
async fn ten_thousand_subnets_write_one_record_each() {
    let (store, fabric, c) = setup().await;
    vn(&c, "vn", "10.0.0.0/8").await;
    let start = Instant::now();
    let mut segments = HashSet::new();
    for i in 0..10_000u32 {
        let cidr = format!("10.{}.{}.0/24", i / 256, i % 256);
        let r = c
            .create_subnet(&subnet_req(&format!("s{i}"), "vn", &cidr, None))
            .await
            .unwrap();
        assert!(segments.insert(r.segment_id));
    }
    let took = start.elapsed();
    assert!(took.as_secs() < 20, "10k subnets took {took:?}");
    // One record per subnet, plus the VN.
    assert_eq!(store.len("sim-fabric"), 10_001);
    let start = Instant::now();
    let reopened = SimFabric::open(Arc::new(store.clone())).await.unwrap();
    assert!(start.elapsed().as_secs() < 10);
    assert_eq!(reopened.subnet_count().await, 10_000);
    assert_eq!(
        reopened.segment("s9999").await,
        fabric.segment("s9999").await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_attachments_get_distinct_addresses_and_persist() {
    let (store, _fabric, c) = setup().await;
    vn(&c, "vn", "10.0.0.0/16").await;
    c.create_subnet(&subnet_req("s", "vn", "10.0.1.0/24", None))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..100u32 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            let mac = format!("02:00:00:00:{:02x}:{:02x}", i / 256, i % 256);
            let req = attach_req(&format!("a{i}"), &format!("eth{i}"), &mac, "s", "vn");
            let addrs = c.create_network_attachment(&req).await.unwrap();
            // A query right after the create sees its lease.
            let lease = c
                .query_dhcp_lease(&QueryDhcpLeaseRequest {
                    subnet_id: "s".into(),
                    mac_address: mac,
                })
                .await
                .unwrap();
            assert_eq!(lease.ipv4_address, addrs.ipv4_address);
            addrs.ipv4_address.unwrap()
        }));
    }
    let mut seen = HashSet::new();
    for t in tasks {
        assert!(
            seen.insert(t.await.unwrap()),
            "an address was handed out twice"
        );
    }
    let reopened = SimFabric::open(Arc::new(store.clone())).await.unwrap();
    for i in 0..100u32 {
        let a = reopened.network_attachment(&format!("a{i}")).await.unwrap();
        assert!(seen.contains(&IpAddr::V4(a.ipv4_address.unwrap())));
    }
}

#[tokio::test]
async fn failure_injection() {
    let (_, fabric, c) = setup().await;
    vn(&c, "vn", "10.0.0.0/16").await;
    fabric.inject_failure(Operation::CreateSubnet, "s1", 2, FailureKind::Transient);
    let req = subnet_req("s1", "vn", "10.0.1.0/24", None);
    for _ in 0..2 {
        let err = c.create_subnet(&req).await.unwrap_err();
        assert!(err.is_transient(), "{err:?}");
        assert!(err.message().contains("injected"), "{err}");
    }
    let ok = c.create_subnet(&req).await.unwrap();
    assert_eq!(fabric.call_count(Operation::CreateSubnet), 3);
    // Other objects are not affected.
    fabric.inject_failure(
        Operation::CreateSubnet,
        "s2",
        u32::MAX,
        FailureKind::Permanent,
    );
    assert_eq!(c.create_subnet(&req).await.unwrap(), ok);
    let req2 = subnet_req("s2", "vn", "10.0.2.0/24", None);
    for _ in 0..5 {
        is_permanent(
            c.create_subnet(&req2).await,
            "injected permanent failure of create_subnet for 's2'",
        );
    }
    assert!(
        fabric.segment("s2").await.is_none(),
        "a failed call changes nothing"
    );
    fabric.clear_failures();
    c.create_subnet(&req2).await.unwrap();

    fabric.inject_failure(
        Operation::DeleteVirtualNetwork,
        "vn",
        1,
        FailureKind::Permanent,
    );
    fabric.inject_failure(
        Operation::DeleteVirtualNetwork,
        "vn",
        0,
        FailureKind::Permanent,
    );
    is_permanent(
        c.delete_virtual_network(&DeleteVirtualNetworkRequest {
            virtual_network_id: "vn".into(),
        })
        .await,
        "still in use by subnet 's1', subnet 's2'",
    );
    assert_eq!(fabric.call_count(Operation::DeleteVirtualNetwork), 1);
}

#[tokio::test]
async fn external_ip_pools() {
    let (_, fabric, c) = setup().await;
    // A /30 has two usable addresses; the /31 after it two more (no network/broadcast).
    let pool = ["192.0.2.8/31", "192.0.2.0/30"];
    let mut got = vec![];
    for i in 0..4 {
        got.push(allocated_address(&c, &format!("e{i}"), &pool).await);
    }
    assert_eq!(
        got,
        [
            ip("192.0.2.1"),
            ip("192.0.2.2"),
            ip("192.0.2.8"),
            ip("192.0.2.9")
        ]
    );
    is_permanent(
        c.allocate_external_ip(&eip_req("e4", &pool)).await,
        "pool exhausted",
    );
    assert_eq!(allocated_address(&c, "e1", &pool).await, ip("192.0.2.2"));
    // Releasing frees the lowest address for the next allocation.
    c.release_external_ip(&ReleaseExternalIpRequest {
        external_ip_id: "e0".into(),
        pool_id: "pool".into(),
    })
    .await
    .unwrap();
    assert_eq!(allocated_address(&c, "e5", &pool).await, ip("192.0.2.1"));
    assert_eq!(fabric.external_addresses().await.len(), 4);
    // Another pool id for an existing allocation is a conflict.
    let mut other = eip_req("e1", &pool);
    other.pool_id = "other".into();
    is_permanent(
        c.allocate_external_ip(&other).await,
        "already allocated from pool 'pool'",
    );
    // IPv6 pools start after the all-zeros address.
    assert_eq!(
        allocated_address(&c, "v6", &["2001:db8::/64"]).await,
        ip("2001:db8::1")
    );
}

#[tokio::test]
async fn ports_skip_gateway_and_vips_and_move_between_parking_and_subnets() {
    let (_, fabric, c) = setup().await;
    vn(&c, "vn", "10.0.0.0/16").await;
    // .0 network, .1 gateway, .8-.15 VIPs (.15 also broadcast): ports get .2-.7.
    let s = c
        .create_subnet(&subnet_req("s", "vn", "10.0.1.0/28", Some("10.0.1.8/29")))
        .await
        .unwrap();
    assert_eq!(s.ipv4_gateway, Some(ip("10.0.1.1")));
    let mut addrs = vec![];
    for i in 0..6 {
        let r = c
            .create_network_attachment(&attach_req(
                &format!("a{i}"),
                &format!("if{i}"),
                &format!("02:00:00:00:00:0{i}"),
                "s",
                "vn",
            ))
            .await
            .unwrap();
        addrs.push(r.ipv4_address.unwrap());
        assert!(r.ipv6_address.is_none());
    }
    assert_eq!(
        addrs,
        (2..=7)
            .map(|i| ip(&format!("10.0.1.{i}")))
            .collect::<Vec<_>>()
    );
    is_permanent(
        c.create_network_attachment(&attach_req("a6", "if6", "02:00:00:00:00:06", "s", "vn"))
            .await,
        "no free IPv4 address",
    );
    // Same port twice / same MAC twice are conflicts.
    is_permanent(
        c.create_network_attachment(&attach_req("x", "if0", "02:00:00:00:01:00", "s", "vn"))
            .await,
        "already attached",
    );
    is_permanent(
        c.create_network_attachment(&attach_req("x", "ifx", "02:00:00:00:00:00", "s", "vn"))
            .await,
        "already has network attachment",
    );
    // The lease is there right away, whatever the MAC's notation.
    let lease = c
        .query_dhcp_lease(&QueryDhcpLeaseRequest {
            subnet_id: "s".into(),
            mac_address: "02-00-00-00-00-00".into(),
        })
        .await
        .unwrap();
    assert_eq!(lease.ipv4_address, Some(ip("10.0.1.2")));
    assert_eq!(
        fabric.port("host-1", "if0").await,
        Some(PortLocation::Attached {
            attachment_id: "a0".into(),
            subnet_id: "s".into()
        })
    );
    is_permanent(
        c.delete_subnet(&DeleteSubnetRequest {
            subnet_id: "s".into(),
            virtual_network_id: "vn".into(),
        })
        .await,
        "still has 6 network attachment(s)",
    );
    let del = |park| DeleteNetworkAttachmentRequest {
        attachment_id: "a0".into(),
        host: "host-1".into(),
        interface: "if0".into(),
        mac_address: "02:00:00:00:00:00".into(),
        subnet_id: "s".into(),
        park,
    };
    c.delete_network_attachment(&del(true)).await.unwrap();
    assert_eq!(
        fabric.port("host-1", "if0").await,
        Some(PortLocation::Parked)
    );
    c.delete_network_attachment(&del(false)).await.unwrap();
    assert_eq!(
        fabric.port("host-1", "if0").await,
        Some(PortLocation::Detached)
    );
    assert!(fabric.lease("s", "02:00:00:00:00:00").await.is_none());
    // The freed address is reused.
    let r = c
        .create_network_attachment(&attach_req("a7", "if7", "02:00:00:00:00:07", "s", "vn"))
        .await
        .unwrap();
    assert_eq!(r.ipv4_address, Some(ip("10.0.1.2")));
}

#[tokio::test]
async fn held_leases_answer_not_yet() {
    let (_, fabric, c) = setup().await;
    vn(&c, "vn", "10.0.0.0/16").await;
    c.create_subnet(&subnet_req("s", "vn", "10.0.1.0/24", None))
        .await
        .unwrap();
    fabric.hold_lease("02:00:00:00:00:01", 2);
    c.create_network_attachment(&attach_req("a", "if0", "02:00:00:00:00:01", "s", "vn"))
        .await
        .unwrap();
    let q = QueryDhcpLeaseRequest {
        subnet_id: "s".into(),
        mac_address: "02:00:00:00:00:01".into(),
    };
    assert!(c.query_dhcp_lease(&q).await.unwrap().is_empty());
    assert!(c.query_dhcp_lease(&q).await.unwrap().is_empty());
    assert_eq!(
        c.query_dhcp_lease(&q).await.unwrap().ipv4_address,
        Some(ip("10.0.1.2"))
    );
    is_permanent(
        c.query_dhcp_lease(&QueryDhcpLeaseRequest {
            subnet_id: "nope".into(),
            mac_address: "02:00:00:00:00:01".into(),
        })
        .await,
        "does not exist",
    );
}

#[tokio::test]
async fn validates_like_a_backend() {
    let (_, _fabric, c) = setup().await;
    vn(&c, "vn", "10.0.0.0/16").await;
    is_permanent(
        c.create_subnet(&subnet_req("s", "nope", "10.0.1.0/24", None))
            .await,
        "virtual network 'nope' does not exist",
    );
    is_permanent(
        c.create_subnet(&subnet_req("s", "vn", "10.1.1.0/24", None))
            .await,
        "not inside virtual network CIDR",
    );
    is_permanent(
        c.create_subnet(&subnet_req("s", "vn", "10.0.1.5/24", None))
            .await,
        "host bits",
    );
    is_permanent(
        c.create_subnet(&subnet_req("s", "vn", "10.0.1.0/24", Some("10.0.2.0/28")))
            .await,
        "vip_cidr",
    );
    c.create_subnet(&subnet_req("s", "vn", "10.0.1.0/24", None))
        .await
        .unwrap();
    is_permanent(
        c.create_subnet(&subnet_req("s", "vn", "10.0.3.0/24", None))
            .await,
        "already exists",
    );
    is_permanent(
        c.create_subnet(&subnet_req("t", "vn", "10.0.0.0/20", None))
            .await,
        "overlaps subnet 's'",
    );
    // Same CIDR in another VN is fine.
    vn(&c, "vn2", "10.0.0.0/16").await;
    c.create_subnet(&subnet_req("u", "vn2", "10.0.1.0/24", None))
        .await
        .unwrap();

    let bad_rule = ApplySecurityGroupRequest {
        security_group_id: "sg".into(),
        virtual_network_id: "vn".into(),
        ingress: vec![SecurityRule {
            protocol: Protocol::Icmp,
            port_from: Some(1),
            port_to: Some(2),
            cidr: "0.0.0.0/0".parse().unwrap(),
        }],
        egress: vec![],
    };
    is_permanent(c.apply_security_group(&bad_rule).await, "ingress rule 0");

    // SG of another VN on a port.
    c.apply_security_group(&ApplySecurityGroupRequest {
        security_group_id: "sg2".into(),
        virtual_network_id: "vn2".into(),
        ingress: vec![],
        egress: vec![],
    })
    .await
    .unwrap();
    let mut na = attach_req("a", "if0", "02:00:00:00:00:01", "s", "vn");
    na.security_groups = vec!["sg2".into()];
    is_permanent(
        c.create_network_attachment(&na).await,
        "belongs to virtual network 'vn2'",
    );
    na.security_groups = vec!["missing".into()];
    is_permanent(
        c.create_network_attachment(&na).await,
        "security group 'missing' does not exist",
    );
    na.security_groups = vec![];
    na.mac_address = "nope".into();
    is_permanent(c.create_network_attachment(&na).await, "not a MAC address");

    // NAT and DNAT need allocated, unused external addresses.
    let nat = |id: &str, addr: IpAddr| CreateNatGatewayRequest {
        nat_gateway_id: id.into(),
        virtual_network_id: "vn".into(),
        external_address: addr,
        source_cidrs: vec![],
    };
    is_permanent(
        c.create_nat_gateway(&nat("n", ip("198.51.100.7"))).await,
        "is not allocated",
    );
    let a = allocated_address(&c, "e1", &["198.51.100.0/24"]).await;
    let b = allocated_address(&c, "e2", &["198.51.100.0/24"]).await;
    c.create_nat_gateway(&nat("n", a)).await.unwrap();
    is_permanent(
        c.create_nat_gateway(&nat("n2", b)).await,
        "already has NAT gateway 'n'",
    );
    let dnat = |addr: IpAddr, target: &str| CreateExternalIpAttachmentRequest {
        attachment_id: "d".into(),
        virtual_network_id: "vn".into(),
        external_address: addr,
        target_ip: ip(target),
    };
    is_permanent(
        c.create_external_ip_attachment(&dnat(a, "10.0.1.5")).await,
        "already used by NAT gateway 'n'",
    );
    is_permanent(
        c.create_external_ip_attachment(&dnat(ip("198.51.100.99"), "10.0.1.5"))
            .await,
        "is not allocated",
    );
    is_permanent(
        c.create_external_ip_attachment(&dnat(b, "192.168.0.1"))
            .await,
        "not inside virtual network",
    );
    c.create_external_ip_attachment(&dnat(b, "10.0.1.5"))
        .await
        .unwrap();
    // Re-targeting the same attachment is an update.
    c.create_external_ip_attachment(&dnat(b, "10.0.1.6"))
        .await
        .unwrap();
    is_permanent(
        c.release_external_ip(&ReleaseExternalIpRequest {
            external_ip_id: "e2".into(),
            pool_id: "pool".into(),
        })
        .await,
        "still used by external IP attachment 'd'",
    );
    // Deleting what does not exist succeeds.
    c.delete_nat_gateway(&DeleteNatGatewayRequest {
        nat_gateway_id: "zz".into(),
        virtual_network_id: "vn".into(),
    })
    .await
    .unwrap();
    c.delete_security_group(&DeleteSecurityGroupRequest {
        security_group_id: "zz".into(),
        virtual_network_id: "vn".into(),
    })
    .await
    .unwrap();
    c.delete_subnet(&DeleteSubnetRequest {
        subnet_id: "zz".into(),
        virtual_network_id: "vn".into(),
    })
    .await
    .unwrap();
    c.delete_virtual_network(&DeleteVirtualNetworkRequest {
        virtual_network_id: "zz".into(),
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn k8s_overlays() {
    let store = MemorySimState::new();
    let k8s = SimK8s::open(Arc::new(store.clone())).await.unwrap();
    let m =
        Arc::new(SimManager::k8s(Registration::sim("sim-k8s", Role::K8s), k8s.clone()).unwrap());
    let client: Arc<dyn K8sManager> = m.clone();
    assert_eq!(client.hosting_clusters(), ["hosting-a", "hosting-b"]);
    let req = |subnet: &str, segment: i64, cluster: &str| CreateSubnetOverlayRequest {
        subnet_id: subnet.into(),
        segment_id: segment,
        hosting_cluster: cluster.into(),
        ipv4_cidr: Some("10.0.1.0/24".parse().unwrap()),
        ipv6_cidr: None,
        vip_cidr: Some("10.0.1.240/28".parse().unwrap()),
    };
    client
        .create_subnet_overlay(&req("s1", 100, "hosting-a"))
        .await
        .unwrap();
    is_permanent(
        client
            .create_subnet_overlay(&req("s2", 100, "hosting-a"))
            .await,
        "already bridged",
    );
    is_permanent(
        client
            .create_subnet_overlay(&req("s2", 0, "hosting-a"))
            .await,
        "VXLAN range",
    );
    is_permanent(
        client
            .create_subnet_overlay(&req("s2", 101, "hosting-z"))
            .await,
        "unknown hosting cluster",
    );
    k8s.inject_failure(
        Operation::CreateSubnetOverlay,
        "s2",
        1,
        FailureKind::Transient,
    );
    assert!(
        client
            .create_subnet_overlay(&req("s2", 101, "hosting-b"))
            .await
            .unwrap_err()
            .is_transient()
    );
    client
        .create_subnet_overlay(&req("s2", 101, "hosting-b"))
        .await
        .unwrap();
    assert_eq!(k8s.call_count(Operation::CreateSubnetOverlay), 6);

    let reopened = SimK8s::open(Arc::new(store)).await.unwrap();
    assert_eq!(
        reopened
            .overlay("s2", "hosting-b")
            .await
            .unwrap()
            .segment_id,
        101
    );
    assert_eq!(reopened.overlays().await.len(), 2);
}
