//! Contract conformance suites, written once and run against every driver (sim, exec, linux, ovn)
//! through the [`FabricManager`] / [`K8sManager`] traits the controllers call, so they all
//! behave the same for the controllers. They return the first violation
//! instead of panicking, so they can also back a provider's self-check (built with the
//! `testing` feature).

use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::contract::{FabricManager, K8sManager, OpError, Role};
use crate::types::*;

/// The first contract violation a suite found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("conformance step '{step}' failed: {message}")]
pub struct ConformanceError {
    /// What was being checked.
    pub step: String,
    /// What went wrong.
    pub message: String,
}

fn fail(step: &str, message: impl Into<String>) -> ConformanceError {
    ConformanceError {
        step: step.to_string(),
        message: message.into(),
    }
}

fn ok<T>(step: &str, r: Result<T, OpError>) -> Result<T, ConformanceError> {
    r.map_err(|e| fail(step, format!("unexpected {e:?}")))
}

fn ensure(
    step: &str,
    cond: bool,
    message: impl FnOnce() -> String,
) -> Result<(), ConformanceError> {
    if cond {
        Ok(())
    } else {
        Err(fail(step, message()))
    }
}

fn permanent<T: std::fmt::Debug>(
    step: &str,
    r: Result<T, OpError>,
) -> Result<(), ConformanceError> {
    match r {
        Err(e) if !e.is_transient() => Ok(()),
        other => Err(fail(
            step,
            format!("expected a permanent error, got {other:?}"),
        )),
    }
}

fn net(s: &str) -> Result<IpNet, ConformanceError> {
    s.parse()
        .map_err(|e| fail("setup", format!("bad prefix {s}: {e}")))
}

/// When a driver reports a DHCP lease, which decides what the fabric suite expects from
/// `query_dhcp_lease` right after `create_network_attachment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LeaseReporting {
    /// The lease exists as soon as the attachment does (sim, exec): the query must return
    /// exactly the attachment's addresses.
    #[default]
    AtAttach,
    /// A real driver (linux) reports a lease only after the machine's DHCP client ran: the
    /// query may also return no address yet, but never addresses other than the attachment's.
    AfterDhcp,
}

/// What a driver declares about itself where the contract leaves room; the default is the
/// strictest reading (sim and exec drivers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FabricSuiteOptions {
    /// When leases appear.
    pub leases: LeaseReporting,
}

/// Runs the fabric suite against `manager` with object ids starting with `prefix` (use a fresh
/// prefix per run against a persistent backend). It creates a VN, subnets, an SG, external IPs,
/// a NAT gateway, network attachments and a DNAT, checks results and idempotency, then deletes
/// everything twice. Strict: see [`fabric_suite_with`] for drivers that declare otherwise.
pub async fn fabric_suite(
    manager: Arc<dyn FabricManager>,
    prefix: &str,
) -> Result<(), ConformanceError> {
    fabric_suite_with(manager, prefix, FabricSuiteOptions::default()).await
}

/// [`fabric_suite`] with what the driver declares (e.g. leases only after DHCP ran).
pub async fn fabric_suite_with(
    fabric: Arc<dyn FabricManager>,
    prefix: &str,
    options: FabricSuiteOptions,
) -> Result<(), ConformanceError> {
    let id = |s: &str| format!("{prefix}-{s}");
    let (vn, s1, s2, sg, e1, e2, pool, nat, na1, na2, ea) = (
        id("vn"),
        id("subnet-1"),
        id("subnet-2"),
        id("sg"),
        id("eip-1"),
        id("eip-2"),
        id("pool"),
        id("nat"),
        id("na-1"),
        id("na-2"),
        id("dnat"),
    );
    let (mac1, mac2) = ("02:00:00:00:00:01", "02:00:00:00:00:02");
    let v4 = |s: &str| s.parse().map_err(|e| fail("setup", format!("{s}: {e}")));
    let v6 = |s: &str| s.parse().map_err(|e| fail("setup", format!("{s}: {e}")));

    // Virtual network.
    let vn_req = CreateVirtualNetworkRequest {
        virtual_network_id: vn.clone(),
        tenant: "conformance".into(),
        ipv4_cidr: Some(v4("10.77.0.0/16")?),
        ipv6_cidr: Some(v6("fd77::/48")?),
    };
    for _ in 0..2 {
        ok(
            "create_virtual_network",
            fabric.create_virtual_network(&vn_req).await,
        )?;
    }

    // Subnets.
    let s1_req = CreateSubnetRequest {
        subnet_id: s1.clone(),
        virtual_network_id: vn.clone(),
        ipv4_cidr: Some(v4("10.77.1.0/24")?),
        ipv6_cidr: Some(v6("fd77:0:0:1::/64")?),
        vip_cidr: Some(net("10.77.1.240/28")?),
    };
    let first = ok("create_subnet", fabric.create_subnet(&s1_req).await)?;
    ensure("create_subnet", first.segment_id > 0, || {
        format!("segment id {} is not positive", first.segment_id)
    })?;
    let gw4: IpAddr = "10.77.1.1".parse().map_err(|_| fail("setup", "gw"))?;
    let gw6: IpAddr = "fd77:0:0:1::1".parse().map_err(|_| fail("setup", "gw"))?;
    ensure(
        "create_subnet gateways",
        first.ipv4_gateway == Some(gw4),
        || format!("IPv4 gateway {:?}, want {gw4}", first.ipv4_gateway),
    )?;
    ensure(
        "create_subnet gateways",
        first.ipv6_gateway == Some(gw6),
        || format!("IPv6 gateway {:?}, want {gw6}", first.ipv6_gateway),
    )?;
    let again = ok("create_subnet again", fabric.create_subnet(&s1_req).await)?;
    ensure("create_subnet idempotent", again == first, || {
        format!("second call returned {again:?}, first {first:?}")
    })?;
    let s2_req = CreateSubnetRequest {
        subnet_id: s2.clone(),
        virtual_network_id: vn.clone(),
        ipv4_cidr: Some(v4("10.77.2.0/24")?),
        ipv6_cidr: None,
        vip_cidr: None,
    };
    let second = ok("create second subnet", fabric.create_subnet(&s2_req).await)?;
    ensure(
        "segment ids unique",
        second.segment_id != first.segment_id,
        || format!("both subnets got segment {}", first.segment_id),
    )?;
    ensure("IPv4-only subnet", second.ipv6_gateway.is_none(), || {
        format!("unexpected IPv6 gateway {:?}", second.ipv6_gateway)
    })?;
    permanent(
        "create_subnet in an unknown virtual network",
        fabric
            .create_subnet(&CreateSubnetRequest {
                subnet_id: id("orphan"),
                virtual_network_id: id("no-such-vn"),
                ..s2_req.clone()
            })
            .await,
    )?;

    // Security group: apply, then re-apply with other rules.
    let rule = |protocol,
                ports: Option<(u16, u16)>,
                cidr: &str|
     -> Result<SecurityRule, ConformanceError> {
        Ok(SecurityRule {
            protocol,
            port_from: ports.map(|p| p.0),
            port_to: ports.map(|p| p.1),
            cidr: net(cidr)?,
        })
    };
    let mut sg_req = ApplySecurityGroupRequest {
        security_group_id: sg.clone(),
        virtual_network_id: vn.clone(),
        ingress: vec![rule(Protocol::Tcp, Some((22, 22)), "0.0.0.0/0")?],
        egress: vec![rule(Protocol::All, None, "0.0.0.0/0")?],
    };
    ok(
        "apply_security_group",
        fabric.apply_security_group(&sg_req).await,
    )?;
    sg_req
        .ingress
        .push(rule(Protocol::Icmp, None, "10.0.0.0/8")?);
    ok(
        "apply_security_group update",
        fabric.apply_security_group(&sg_req).await,
    )?;

    // External IPs.
    let pool_net = net("198.51.100.0/29")?;
    let alloc = |eid: &str| AllocateExternalIpRequest {
        external_ip_id: eid.to_string(),
        pool_id: pool.clone(),
        cidrs: vec![pool_net],
    };
    let a1 = ok(
        "allocate_external_ip",
        fabric.allocate_external_ip(&alloc(&e1)).await,
    )?
    .address;
    let a2 = ok(
        "allocate_external_ip",
        fabric.allocate_external_ip(&alloc(&e2)).await,
    )?
    .address;
    for a in [a1, a2] {
        ensure(
            "external address inside the pool",
            pool_net.contains(&a),
            || format!("{a} is not inside {pool_net}"),
        )?;
        ensure(
            "external address usable",
            a != pool_net.network() && a != pool_net.broadcast(),
            || format!("{a} is the network or broadcast address of {pool_net}"),
        )?;
    }
    ensure("external addresses distinct", a1 != a2, || {
        format!("both got {a1}")
    })?;
    let a1_again = ok(
        "allocate_external_ip again",
        fabric.allocate_external_ip(&alloc(&e1)).await,
    )?
    .address;
    ensure("allocate_external_ip idempotent", a1_again == a1, || {
        format!("second allocation gave {a1_again}, first {a1}")
    })?;

    // NAT gateway (SNAT) on the second address.
    let nat_req = CreateNatGatewayRequest {
        nat_gateway_id: nat.clone(),
        virtual_network_id: vn.clone(),
        external_address: a2,
        source_cidrs: vec![net("10.77.0.0/16")?],
    };
    for _ in 0..2 {
        ok(
            "create_nat_gateway",
            fabric.create_nat_gateway(&nat_req).await,
        )?;
    }

    // Network attachments and leases.
    let na_req = |aid: &str, iface: &str, mac: &str, primary| CreateNetworkAttachmentRequest {
        attachment_id: aid.to_string(),
        host: id("host"),
        interface: iface.to_string(),
        mac_address: mac.to_string(),
        subnet_id: s1.clone(),
        virtual_network_id: vn.clone(),
        security_groups: vec![sg.clone()],
        primary,
        allowed_addresses: vec![],
    };
    let p1 = ok(
        "create_network_attachment",
        fabric
            .create_network_attachment(&na_req(&na1, "data-0", mac1, true))
            .await,
    )?;
    let vip = net("10.77.1.240/28")?;
    let s1_v4 = net("10.77.1.0/24")?;
    let s1_v6 = net("fd77:0:0:1::/64")?;
    let ip1 = p1
        .ipv4_address
        .ok_or_else(|| fail("create_network_attachment", "no IPv4 address returned"))?;
    ensure(
        "port address inside the subnet",
        s1_v4.contains(&ip1),
        || format!("{ip1} is not inside {s1_v4}"),
    )?;
    ensure("port address is not the gateway", ip1 != gw4, || {
        format!("{ip1} is the gateway")
    })?;
    ensure(
        "port address outside the VIP range",
        !vip.contains(&ip1),
        || format!("{ip1} is inside the VIP range {vip}"),
    )?;
    let ip1_v6 = p1.ipv6_address.ok_or_else(|| {
        fail(
            "create_network_attachment",
            "no IPv6 address on a dual-stack subnet",
        )
    })?;
    ensure(
        "port IPv6 inside the subnet",
        s1_v6.contains(&ip1_v6) && ip1_v6 != gw6,
        || format!("{ip1_v6} is outside {s1_v6} or the gateway"),
    )?;
    let p1_again = ok(
        "create_network_attachment again",
        fabric
            .create_network_attachment(&na_req(&na1, "data-0", mac1, true))
            .await,
    )?;
    ensure(
        "create_network_attachment idempotent",
        p1_again == p1,
        || format!("second call returned {p1_again:?}, first {p1:?}"),
    )?;
    // A VIP of the subnet's block as an allowed address (cluster agents): accepted, updates the
    // port in place, addresses unchanged.
    let mut with_vip = na_req(&na1, "data-0", mac1, true);
    with_vip.allowed_addresses = vec![IpAddr::V4(
        "10.77.1.241".parse().map_err(|_| fail("setup", "ip"))?,
    )];
    for _ in 0..2 {
        let p = ok(
            "create_network_attachment with allowed_addresses",
            fabric.create_network_attachment(&with_vip).await,
        )?;
        ensure(
            "allowed_addresses keep the port's addresses",
            p == p1,
            || format!("got {p:?}, first {p1:?}"),
        )?;
    }
    let p2 = ok(
        "create second network attachment",
        fabric
            .create_network_attachment(&na_req(&na2, "data-1", mac2, false))
            .await,
    )?;
    ensure(
        "port addresses unique",
        p2.ipv4_address != p1.ipv4_address,
        || format!("both ports got {ip1}"),
    )?;
    let lease = ok(
        "query_dhcp_lease",
        fabric
            .query_dhcp_lease(&QueryDhcpLeaseRequest {
                subnet_id: s1.clone(),
                mac_address: mac1.into(),
            })
            .await,
    )?;
    let no_lease_yet = options.leases == LeaseReporting::AfterDhcp && lease.is_empty();
    ensure(
        "lease matches the attachment",
        lease == p1 || no_lease_yet,
        || format!("lease {lease:?}, attachment {p1:?}"),
    )?;
    let none = ok(
        "query_dhcp_lease unknown MAC",
        fabric
            .query_dhcp_lease(&QueryDhcpLeaseRequest {
                subnet_id: s1.clone(),
                mac_address: "02:00:00:00:00:99".into(),
            })
            .await,
    )?;
    ensure("no lease for an unknown MAC", none.is_empty(), || {
        format!("got {none:?}")
    })?;

    // Inbound DNAT to the first port.
    let ea_req = CreateExternalIpAttachmentRequest {
        attachment_id: ea.clone(),
        virtual_network_id: vn.clone(),
        external_address: a1,
        target_ip: ip1,
    };
    for _ in 0..2 {
        ok(
            "create_external_ip_attachment",
            fabric.create_external_ip_attachment(&ea_req).await,
        )?;
    }
    permanent(
        "create_external_ip_attachment with an unallocated address",
        fabric
            .create_external_ip_attachment(&CreateExternalIpAttachmentRequest {
                attachment_id: id("dnat-bad"),
                external_address: "203.0.113.250".parse().map_err(|_| fail("setup", "ip"))?,
                ..ea_req.clone()
            })
            .await,
    )?;

    // Deletes, each twice (idempotent), in dependency order.
    for round in 0..2 {
        let step = |s: &str| format!("{s} (round {})", round + 1);
        ok(
            &step("delete_external_ip_attachment"),
            fabric
                .delete_external_ip_attachment(&DeleteExternalIpAttachmentRequest {
                    attachment_id: ea.clone(),
                    virtual_network_id: vn.clone(),
                })
                .await,
        )?;
        for (aid, iface, mac, park) in [(&na1, "data-0", mac1, false), (&na2, "data-1", mac2, true)]
        {
            ok(
                &step("delete_network_attachment"),
                fabric
                    .delete_network_attachment(&DeleteNetworkAttachmentRequest {
                        attachment_id: aid.clone(),
                        host: id("host"),
                        interface: iface.into(),
                        mac_address: mac.into(),
                        subnet_id: s1.clone(),
                        park,
                    })
                    .await,
            )?;
        }
        if round == 0 {
            let gone = ok(
                "query_dhcp_lease after detach",
                fabric
                    .query_dhcp_lease(&QueryDhcpLeaseRequest {
                        subnet_id: s1.clone(),
                        mac_address: mac1.into(),
                    })
                    .await,
            )?;
            ensure("lease released", gone.is_empty(), || {
                format!("still {gone:?}")
            })?;
        }
        ok(
            &step("delete_nat_gateway"),
            fabric
                .delete_nat_gateway(&DeleteNatGatewayRequest {
                    nat_gateway_id: nat.clone(),
                    virtual_network_id: vn.clone(),
                })
                .await,
        )?;
        for eid in [&e1, &e2] {
            ok(
                &step("release_external_ip"),
                fabric
                    .release_external_ip(&ReleaseExternalIpRequest {
                        external_ip_id: eid.clone(),
                        pool_id: pool.clone(),
                    })
                    .await,
            )?;
        }
        ok(
            &step("delete_security_group"),
            fabric
                .delete_security_group(&DeleteSecurityGroupRequest {
                    security_group_id: sg.clone(),
                    virtual_network_id: vn.clone(),
                })
                .await,
        )?;
        for sid in [&s1, &s2] {
            ok(
                &step("delete_subnet"),
                fabric
                    .delete_subnet(&DeleteSubnetRequest {
                        subnet_id: sid.clone(),
                        virtual_network_id: vn.clone(),
                    })
                    .await,
            )?;
        }
        ok(
            &step("delete_virtual_network"),
            fabric
                .delete_virtual_network(&DeleteVirtualNetworkRequest {
                    virtual_network_id: vn.clone(),
                })
                .await,
        )?;
    }
    Ok(())
}

/// Runs the k8s suite: an overlay on every hosting cluster of the registration (twice), an
/// unknown cluster (permanent), then deletes twice.
pub async fn k8s_suite(k8s: Arc<dyn K8sManager>, prefix: &str) -> Result<(), ConformanceError> {
    ensure("role", k8s.registration().role == Role::K8s, || {
        "manager is not registered for role k8s".into()
    })?;
    let subnet_id = format!("{prefix}-subnet");
    let clusters = k8s.hosting_clusters().to_vec();
    ensure("hosting clusters", !clusters.is_empty(), || {
        "the registration lists no hosting cluster".into()
    })?;
    let req = |cluster: &str| -> Result<CreateSubnetOverlayRequest, ConformanceError> {
        Ok(CreateSubnetOverlayRequest {
            subnet_id: subnet_id.clone(),
            segment_id: 4242,
            hosting_cluster: cluster.to_string(),
            ipv4_cidr: Some("10.77.1.0/24".parse().map_err(|_| fail("setup", "cidr"))?),
            ipv6_cidr: None,
            vip_cidr: Some(net("10.77.1.240/28")?),
        })
    };
    for cluster in &clusters {
        for _ in 0..2 {
            ok(
                "create_subnet_overlay",
                k8s.create_subnet_overlay(&req(cluster)?).await,
            )?;
        }
    }
    permanent(
        "create_subnet_overlay on an unknown hosting cluster",
        k8s.create_subnet_overlay(&req("no-such-cluster")?).await,
    )?;
    for _ in 0..2 {
        for cluster in &clusters {
            ok(
                "delete_subnet_overlay",
                k8s.delete_subnet_overlay(&DeleteSubnetOverlayRequest {
                    subnet_id: subnet_id.clone(),
                    hosting_cluster: cluster.clone(),
                })
                .await,
            )?;
        }
    }
    Ok(())
}
