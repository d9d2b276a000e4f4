//! The rendered northbound rows carry real packets the way every osac driver must: a sandbox of
//! two hypervisors and a provider network, two tenants' networks, ports with and without
//! security groups, native DHCP (with the DHCP client of `osac-linux`), NAT. Needs root (network namespaces), the OVN packages and `socat`; without
//! them it says so and passes, except under CI, where it must run.

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use common::net::{
    Connection, Listeners, connects, eventually, in_ns, ping, remove_ns, sh, tcp, udp_send,
};

use osac_backends::types::{
    ApplySecurityGroupRequest, CreateExternalIpAttachmentRequest, CreateNatGatewayRequest,
    CreateNetworkAttachmentRequest, CreateSubnetRequest, CreateVirtualNetworkRequest,
    PortAddresses, Protocol, SecurityRule,
};
use osac_linux::dhcp::apply::Applied;
use osac_linux::dhcp::packet::parse_mac;
use osac_linux::dhcp::{Client6Config, ClientConfig, Dhcp6Client, DhcpClient, Status, Timing};
use osac_ovn::nb::{self, Row, Scope};
use osac_ovn::render::{self, external, port, security};
use osac_ovn::sandbox::{self, PROVIDER_BRIDGE, Sandbox, SandboxConfig};
use osac_ovsdb::Client;

const PREFIX: &str = "ovntp";
const PROVIDER_NETWORK: &str = "physnet";

fn can_run() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let socat = Command::new("socat").arg("-V").output().is_ok();
    let why = match (root, sandbox::missing_sandbox_tools(), socat) {
        (true, None, true) => return true,
        (false, ..) => "not root".to_string(),
        (true, Some(missing), _) => format!("missing {missing}"),
        (true, None, false) => "missing socat".to_string(),
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "the OVN packet test must run under CI but cannot: {why}"
    );
    eprintln!("skipped: {why}");
    false
}

async fn converge(nb: &Client, rows: Vec<Row>) {
    nb::converge(nb, &rows, &Scope::Keys(BTreeSet::new()))
        .await
        .expect("converge");
}

fn rule(protocol: Protocol, port: Option<u16>, cidr: &str) -> SecurityRule {
    SecurityRule {
        protocol,
        port_from: port,
        port_to: port,
        cidr: cidr.parse().unwrap(),
    }
}

/// A workload: its attachment, namespace, hypervisor index and address.
struct Vm {
    attachment: CreateNetworkAttachmentRequest,
    ns: String,
    hv: usize,
    ip: &'static str,
    gateway: &'static str,
    ip6: Option<&'static str>,
}

fn vm(
    name: &str,
    hv: usize,
    (vn, subnet, ip, gateway): (&str, &str, &'static str, &'static str),
    groups: &[&str],
) -> Vm {
    let n = name.trim_start_matches("vm");
    Vm {
        attachment: CreateNetworkAttachmentRequest {
            attachment_id: name.into(),
            host: format!("hv{}", hv + 1),
            interface: "eth0".into(),
            mac_address: format!("0a:00:00:00:00:{n:0>2}"),
            subnet_id: subnet.into(),
            virtual_network_id: vn.into(),
            security_groups: groups.iter().map(|g| g.to_string()).collect(),
            primary: true,
            allowed_addresses: vec![],
        },
        ns: format!("{PREFIX}-{name}"),
        hv,
        ip,
        gateway,
        ip6: None,
    }
}

#[tokio::test]
async fn ports_groups_and_nat_carry_exactly_the_allowed_packets() {
    if !can_run() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sbx = Sandbox::start(SandboxConfig {
        dir: dir.path().to_path_buf(),
        prefix: PREFIX.into(),
        hypervisors: 2,
        provider_network: Some(PROVIDER_NETWORK.into()),
    })
    .await
    .expect("sandbox");
    let (nb, _) = Client::connect(sbx.nb()).await.expect("northbound");
    let provider_ns = sbx.provider_namespace().expect("provider namespace");
    // The outside world: 172.31.0.1 on the provider network, the pool 203.0.113.0/24 routed
    // to VN v1's uplink.
    sh(&[
        "ip",
        "-n",
        &provider_ns,
        "addr",
        "add",
        "172.31.0.1/24",
        "dev",
        PROVIDER_BRIDGE,
    ]);
    sh(&[
        "ip",
        "-n",
        &provider_ns,
        "route",
        "add",
        "203.0.113.0/24",
        "via",
        "172.31.0.2",
    ]);

    // IPv6: fd00:64::1 on the provider network, the pool 2001:db8::/64 routed to v1's uplink.
    sh(&[
        "ip",
        "-n",
        &provider_ns,
        "addr",
        "add",
        "fd00:64::1/64",
        "dev",
        PROVIDER_BRIDGE,
        "nodad",
    ]);
    sh(&[
        "ip",
        "-n",
        &provider_ns,
        "-6",
        "route",
        "add",
        "2001:db8::/64",
        "via",
        "fd00:64::2",
    ]);
    let provider = external::ProviderNetwork {
        network_name: PROVIDER_NETWORK.into(),
        transit_cidr: "172.31.0.0/24".parse().unwrap(),
        gateway: "172.31.0.1".parse().unwrap(),
        ipv6: Some(external::Ipv6Transit {
            cidr: "fd00:64::/64".parse().unwrap(),
            gateway: "fd00:64::1".parse().unwrap(),
        }),
    };
    converge(&nb, vec![external::provider_switch(&provider)]).await;
    // v1 is dual-stack, v2 IPv4 only.
    for (vn, tenant, subnet, cidr, cidr6, segment) in [
        ("v1", "ta", "s1", "10.0.1.0/24", Some("fd00:1::/64"), 101),
        ("v2", "tb", "s2", "10.0.2.0/24", None, 102),
    ] {
        let rows = render::virtual_network(&CreateVirtualNetworkRequest {
            virtual_network_id: vn.into(),
            tenant: tenant.into(),
            ipv4_cidr: Some("10.0.0.0/16".parse().unwrap()),
            ipv6_cidr: cidr6.map(|_| "fd00::/16".parse().unwrap()),
        });
        converge(&nb, vec![rows.router, rows.ports]).await;
        let subnet = render::subnet(
            &CreateSubnetRequest {
                subnet_id: subnet.into(),
                virtual_network_id: vn.into(),
                ipv4_cidr: Some(cidr.parse().unwrap()),
                ipv6_cidr: cidr6.map(|c| c.parse().unwrap()),
                vip_cidr: None,
            },
            tenant,
            segment,
        );
        converge(&nb, subnet.all()).await;
    }
    let groups = [
        (
            "web",
            "v1",
            "ta",
            vec![
                rule(Protocol::Tcp, Some(8080), "0.0.0.0/0"),
                rule(Protocol::Icmp, None, "10.0.0.0/16"),
                rule(Protocol::Tcp, Some(8081), "10.0.0.0/16"),
                rule(Protocol::Icmp, None, "fd00::/16"),
                rule(Protocol::Udp, Some(68), "10.0.0.0/16"),
                rule(Protocol::Tcp, Some(8082), "0.0.0.0/0"),
                rule(Protocol::Tcp, Some(8083), "::/0"),
            ],
        ),
        ("client", "v1", "ta", vec![]),
        (
            "open",
            "v2",
            "tb",
            vec![rule(Protocol::All, None, "0.0.0.0/0")],
        ),
    ];
    for (sg, vn, tenant, ingress) in groups {
        let row = security::security_group(
            &ApplySecurityGroupRequest {
                security_group_id: sg.into(),
                virtual_network_id: vn.into(),
                ingress,
                egress: vec![
                    rule(Protocol::All, None, "0.0.0.0/0"),
                    rule(Protocol::All, None, "::/0"),
                ],
            },
            tenant,
        );
        converge(&nb, vec![row]).await;
    }
    let mut vms = [
        vm("vm11", 0, ("v1", "s1", "10.0.1.11", "10.0.1.1"), &["web"]),
        vm(
            "vm12",
            1,
            ("v1", "s1", "10.0.1.12", "10.0.1.1"),
            &["client"],
        ),
        vm("vm13", 1, ("v1", "s1", "10.0.1.13", "10.0.1.1"), &[]),
        vm("vm24", 0, ("v2", "s2", "10.0.2.24", "10.0.2.1"), &["open"]),
    ];
    vms[0].ip6 = Some("fd00:1::11");
    vms[1].ip6 = Some("fd00:1::12");
    for v in &vms {
        let tenant = if v.attachment.virtual_network_id == "v1" {
            "ta"
        } else {
            "tb"
        };
        let addresses = PortAddresses {
            ipv4_address: Some(v.ip.parse().unwrap()),
            ipv6_address: v.ip6.map(|a| a.parse().unwrap()),
        };
        converge(
            &nb,
            vec![port::port(&v.attachment, &addresses, &[], tenant)],
        )
        .await;
        remove_ns(&v.ns);
        sh(&["ip", "netns", "add", &v.ns]);
        sbx.hypervisors()[v.hv]
            .plug(
                &port::port_name(&v.attachment.attachment_id),
                &v.ns,
                "eth0",
                &v.attachment.mac_address,
            )
            .await
            .expect("plug");
        let cidr = format!("{}/24", v.ip);
        sh(&["ip", "-n", &v.ns, "link", "set", "lo", "up"]);
        sh(&["ip", "-n", &v.ns, "link", "set", "eth0", "mtu", "1400"]);
        sh(&["ip", "-n", &v.ns, "addr", "add", &cidr, "dev", "eth0"]);
        sh(&[
            "ip", "-n", &v.ns, "route", "add", "default", "via", v.gateway,
        ]);
        if let Some(ip6) = v.ip6 {
            let cidr6 = format!("{ip6}/64");
            sh(&[
                "ip", "-n", &v.ns, "addr", "add", &cidr6, "dev", "eth0", "nodad",
            ]);
        }
    }
    // Ports without groups that take their addresses from OVN's DHCP server: a primary one
    // gets the router, a secondary one does not.
    let mut dhcp_vms = [
        vm("vm15", 1, ("v1", "s1", "10.0.1.15", "10.0.1.1"), &[]),
        vm("vm16", 0, ("v1", "s1", "10.0.1.16", "10.0.1.1"), &[]),
    ];
    dhcp_vms[0].ip6 = Some("fd00:1::15");
    let mut dhcp_clients = Vec::new();
    let mut dhcp6_clients = Vec::new();
    for (v, primary) in dhcp_vms.iter().zip([true, false]) {
        let mut attachment = v.attachment.clone();
        attachment.primary = primary;
        let addresses = PortAddresses {
            ipv4_address: Some(v.ip.parse().unwrap()),
            ipv6_address: v.ip6.map(|a| a.parse().unwrap()),
        };
        converge(&nb, vec![port::port(&attachment, &addresses, &[], "ta")]).await;
        remove_ns(&v.ns);
        sh(&["ip", "netns", "add", &v.ns]);
        sbx.hypervisors()[v.hv]
            .plug(
                &port::port_name(&attachment.attachment_id),
                &v.ns,
                "eth0",
                &attachment.mac_address,
            )
            .await
            .expect("plug");
        sh(&["ip", "-n", &v.ns, "link", "set", "lo", "up"]);
        dhcp_clients.push(
            DhcpClient::start(ClientConfig {
                netns: v.ns.clone(),
                ifname: "eth0".into(),
                mac: parse_mac(&attachment.mac_address).expect("mac"),
                hostname: None,
                timing: Timing::default(),
            })
            .expect("dhcp client"),
        );
        if v.ip6.is_some() {
            dhcp6_clients.push(
                Dhcp6Client::start(Client6Config {
                    netns: v.ns.clone(),
                    ifname: "eth0".into(),
                    mac: parse_mac(&attachment.mac_address).expect("mac"),
                    timing: Timing::default(),
                })
                .expect("dhcpv6 client"),
            );
        }
    }
    // v1's uplink has an address of each family; v2 (IPv4 only) one.
    let transit1 = ["172.31.0.2".parse().unwrap(), "fd00:64::2".parse().unwrap()];
    let vn_cidr = ["10.0.0.0/16".parse().unwrap()];
    let vn1_cidrs = ["10.0.0.0/16".parse().unwrap(), "fd00::/16".parse().unwrap()];
    let uplink = external::uplink("v1", "ta", &provider, &transit1, &["hv1"], &vn1_cidrs, &[]);
    let default_egress = external::source_nat("v1", "ta", &vn1_cidrs, &transit1);
    converge(
        &nb,
        vec![
            uplink.router,
            uplink.provider_port,
            uplink.guard,
            default_egress,
        ],
    )
    .await;
    // VN v2 has no NAT gateway: its egress leaves with its uplink's transit address, through
    // a gateway chassis other than the VM's hypervisor.
    let transit2 = ["172.31.0.3".parse().unwrap()];
    let uplink2 = external::uplink("v2", "tb", &provider, &transit2, &["hv2"], &vn_cidr, &[]);
    let default_egress2 = external::source_nat("v2", "tb", &vn_cidr, &transit2);
    converge(
        &nb,
        vec![
            uplink2.router,
            uplink2.provider_port,
            uplink2.guard,
            default_egress2,
        ],
    )
    .await;
    let nat = external::nat_gateway(
        &CreateNatGatewayRequest {
            nat_gateway_id: "n1".into(),
            virtual_network_id: "v1".into(),
            external_address: "203.0.113.10".parse().unwrap(),
            source_cidrs: vec!["10.0.0.0/16".parse().unwrap()],
        },
        "ta",
    );
    let dnat = external::external_ip_attachment(
        &CreateExternalIpAttachmentRequest {
            attachment_id: "e1".into(),
            virtual_network_id: "v1".into(),
            external_address: "203.0.113.11".parse().unwrap(),
            target_ip: "10.0.1.11".parse().unwrap(),
        },
        "ta",
    );
    let dnat6 = external::external_ip_attachment(
        &CreateExternalIpAttachmentRequest {
            attachment_id: "e6".into(),
            virtual_network_id: "v1".into(),
            external_address: "2001:db8::11".parse().unwrap(),
            target_ip: "fd00:1::11".parse().unwrap(),
        },
        "ta",
    );
    converge(&nb, vec![nat, dnat, dnat6]).await;

    let mut listeners = Listeners(Vec::new());
    let (server, client, closed, other) = (&vms[0].ns, &vms[1].ns, &vms[2].ns, &vms[3].ns);
    listeners.start(server, 8080);
    listeners.start(server, 9090);
    listeners.start_echo(server, 8081);
    listeners.start_echo(server, 8082);
    listeners.start(closed, 8080);
    listeners.start(&provider_ns, 7070);
    listeners.start_ipv6(server, 8083);
    listeners.start_ipv6(&provider_ns, 7071);
    let udp_log = dir.path().join("udp68.log");
    listeners.start_udp(server, 68, &udp_log);
    let outside_log = dir.path().join("udp67.log");
    listeners.start_udp(&provider_ns, 67, &outside_log);

    // The probes are synchronous; a failure is caught so the sandbox is stopped first.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // One subnet across hypervisors; the web group lets ICMP in from the VN, and the
        // client's echo replies come back although its group lets nothing in.
        eventually("vm12 pings vm11 on the other hypervisor", || {
            ping(client, "10.0.1.11").then_some(())
        });
        let peer = eventually("vm12 connects to vm11:8080", || {
            tcp(client, "10.0.1.11", 8080)
        });
        assert_eq!(peer, "10.0.1.12", "the server saw the client's own address");
        assert_eq!(
            tcp(client, "10.0.1.11", 9090),
            None,
            "9090 is not allowed in"
        );
        assert!(
            !ping(server, "10.0.1.12"),
            "the client's group lets nothing in"
        );
        // A port without groups: its control plane only.
        assert!(
            !ping(client, "10.0.1.13"),
            "a port without groups was reached"
        );
        assert_eq!(tcp(client, "10.0.1.13", 8080), None);
        assert!(!ping(closed, "10.0.1.11"), "a port without groups sent");
        // IPv6: across hypervisors, the gateway advertised, a forged source dropped.
        eventually("vm12 pings vm11 over IPv6", || {
            in_ns(client, &["ping", "-6", "-c1", "-W1", "fd00:1::11"])
                .status
                .success()
                .then_some(())
        });
        let route6 = eventually(
            "vm12 learns its IPv6 default route from an advertisement",
            || {
                let out = in_ns(client, &["ip", "-6", "route", "show", "default"]);
                let text = String::from_utf8_lossy(&out.stdout).to_string();
                text.contains("via fe80::").then_some(text)
            },
        );
        assert!(route6.contains("dev eth0"), "{route6}");
        assert!(
            !in_ns(server, &["ping", "-6", "-c1", "-W1", "fd00:1::12"])
                .status
                .success(),
            "the client's group lets no IPv6 in"
        );
        sh(&[
            "ip",
            "-n",
            client,
            "addr",
            "add",
            "fd00:1::99/64",
            "dev",
            "eth0",
            "nodad",
        ]);
        let forged6 = in_ns(
            client,
            &["ping", "-6", "-c1", "-W1", "-I", "fd00:1::99", "fd00:1::11"],
        );
        assert!(!forged6.status.success(), "a forged IPv6 source passed");
        sh(&[
            "ip",
            "-n",
            client,
            "addr",
            "del",
            "fd00:1::99/64",
            "dev",
            "eth0",
        ]);
        // No port acts as a DHCP server, whatever its groups allow: vm11's group
        // lets UDP in to port 68 and vm12's lets everything out, yet a datagram from port 67
        // (a DHCP server's) is dropped while one from another port arrives.
        udp_send(client, 6767, "10.0.1.11", 68, "ordinary");
        eventually("an ordinary datagram to vm11:68 arrives", || {
            let got = std::fs::read_to_string(&udp_log).unwrap_or_default();
            if got.contains("ordinary") {
                return Some(());
            }
            udp_send(client, 6767, "10.0.1.11", 68, "ordinary");
            None
        });
        udp_send(client, 67, "10.0.1.11", 68, "rogue-offer");
        std::thread::sleep(Duration::from_secs(1));
        let got = std::fs::read_to_string(&udp_log).unwrap_or_default();
        assert!(
            !got.contains("rogue-offer"),
            "DHCP server traffic from a port passed"
        );
        // Broadcasts meet the groups like unicast: vm12's reaches vm11, whose group lets UDP
        // 68 in; vm13's (no groups) does not leave.
        let received = |text: &str| {
            std::fs::read_to_string(&udp_log)
                .unwrap_or_default()
                .contains(text)
        };
        eventually("vm12's broadcast reaches vm11", || {
            udp_send(client, 6767, "10.0.1.255", 68, "broadcast-allowed");
            std::thread::sleep(Duration::from_millis(200));
            received("broadcast-allowed").then_some(())
        });
        udp_send(closed, 6767, "10.0.1.255", 68, "broadcast-closed");
        std::thread::sleep(Duration::from_secs(1));
        assert!(
            !received("broadcast-closed"),
            "a port without groups broadcast"
        );
        // The control plane a port without groups may send is DHCP toward its own subnet's
        // server only: a "DHCP request" to an outside address does not leave.
        eventually(
            "a datagram from vm12 to the provider's port 67 arrives",
            || {
                let got = std::fs::read_to_string(&outside_log).unwrap_or_default();
                if got.contains("ordinary") {
                    return Some(());
                }
                udp_send(client, 6868, "172.31.0.1", 67, "ordinary");
                None
            },
        );
        udp_send(closed, 68, "172.31.0.1", 67, "escape");
        std::thread::sleep(Duration::from_secs(1));
        let got = std::fs::read_to_string(&outside_log).unwrap_or_default();
        assert!(
            !got.contains("escape"),
            "a port without groups sent to the outside as a DHCP client"
        );
        // Native DHCP through the network group's control-plane ACLs.
        let leases: Vec<_> = dhcp_clients
            .iter()
            .map(|c| {
                eventually("a DHCP lease", || match c.status() {
                    Status::Bound(applied) => Some(applied),
                    _ => None,
                })
            })
            .collect();
        let default_route = |a: &Applied| a.routes.iter().any(|r| r.prefix_len == 0);
        assert_eq!(
            (leases[0].address.to_string(), leases[0].prefix_len),
            ("10.0.1.15".to_string(), 24)
        );
        assert!(default_route(&leases[0]), "{:?}", leases[0]);
        assert_eq!(leases[1].address.to_string(), "10.0.1.16");
        assert!(
            !default_route(&leases[1]),
            "a secondary port got a router: {:?}",
            leases[1]
        );
        let lease6 = eventually("a DHCPv6 lease", || match dhcp6_clients[0].status() {
            Status::Bound(applied) => Some(applied),
            _ => None,
        });
        assert_eq!(lease6.address.to_string(), "fd00:1::15");
        // Anti-spoofing: another source address, then another MAC, are dropped.
        sh(&[
            "ip",
            "-n",
            client,
            "addr",
            "add",
            "10.0.1.99/24",
            "dev",
            "eth0",
        ]);
        let forged_ip = in_ns(
            client,
            &["ping", "-c1", "-W1", "-I", "10.0.1.99", "10.0.1.11"],
        );
        assert!(
            !forged_ip.status.success(),
            "a forged source address passed"
        );
        sh(&[
            "ip",
            "-n",
            client,
            "addr",
            "del",
            "10.0.1.99/24",
            "dev",
            "eth0",
        ]);
        sh(&[
            "ip",
            "-n",
            client,
            "link",
            "set",
            "eth0",
            "address",
            "0a:00:00:00:00:99",
        ]);
        sh(&["ip", "-n", client, "neigh", "flush", "all"]);
        assert!(!ping(client, "10.0.1.11"), "a forged source MAC passed");
        sh(&[
            "ip",
            "-n",
            client,
            "link",
            "set",
            "eth0",
            "address",
            "0a:00:00:00:00:12",
        ]);
        eventually("vm12 pings again with its own MAC", || {
            ping(client, "10.0.1.11").then_some(())
        });
        // Another tenant's network: its VM is alive (it pings its gateway), yet unreachable.
        eventually("vm24 pings its gateway", || {
            ping(other, "10.0.2.1").then_some(())
        });
        assert!(!ping(client, "10.0.2.24"), "another VN's VM was reached");
        assert!(!ping(other, "10.0.1.11"), "another VN reached this one");
        // Inbound through the ExternalIP: the server sees the outside client's address.
        let inbound = eventually("the provider reaches 203.0.113.11:8080", || {
            tcp(&provider_ns, "203.0.113.11", 8080)
        });
        assert_eq!(inbound, "172.31.0.1");
        // Hairpin: a VM of the VN reaches the VN's own external address; the server sees the
        // VN's egress address, so its reply returns through the router.
        let hairpin = eventually("vm12 reaches vm11 through 203.0.113.11", || {
            tcp(client, "203.0.113.11", 8080)
        });
        assert_eq!(hairpin, "203.0.113.10");
        // Outbound through the NAT gateway: the outside sees the gateway's address.
        let outbound = eventually("vm12 reaches the provider", || {
            tcp(client, "172.31.0.1", 7070)
        });
        assert_eq!(outbound, "203.0.113.10");
        let default_out = eventually("vm24 reaches the provider", || {
            tcp(other, "172.31.0.1", 7070)
        });
        assert_eq!(
            default_out, "172.31.0.3",
            "a VN without a NAT gateway leaves with its transit address"
        );
        // IPv6 through the ExternalIP and out: the VN's NAT gateway is IPv4, so its IPv6
        // egress leaves with the uplink's IPv6 transit address.
        let inbound6 = eventually("the provider reaches [2001:db8::11]:8083", || {
            tcp(&provider_ns, "[2001:db8::11]", 8083)
        });
        assert_eq!(
            ipv6(&inbound6),
            "fd00:64::1".parse::<std::net::Ipv6Addr>().unwrap()
        );
        let outbound6 = eventually("vm12 reaches the provider over IPv6", || {
            tcp(client, "[fd00:64::1]", 7071)
        });
        assert_eq!(
            ipv6(&outbound6),
            "fd00:64::2".parse::<std::net::Ipv6Addr>().unwrap()
        );
        // A connection to a port a rule allows, kept open while the rule is removed.
        let mut open = eventually("vm12 opens a connection to vm11:8081", || {
            Connection::open(client, "10.0.1.11", 8081)
        });
        assert_eq!(open.echo("one").as_deref(), Some("one"));
        // A connection through the ExternalIP, kept open while the attachment is removed.
        let mut inbound = eventually(
            "the provider opens a connection to 203.0.113.11:8082",
            || Connection::open(&provider_ns, "203.0.113.11", 8082),
        );
        assert_eq!(inbound.echo("one").as_deref(), Some("one"));
        (open, inbound)
    }));
    // ovn-trace, an oracle independent of the packets, agrees on what the web group allows.
    let microflow = |port: u16| {
        format!(
            "inport == \"{}\" && eth.src == 0a:00:00:00:00:12 && eth.dst == 0a:00:00:00:00:11 && \
             ip4.src == 10.0.1.12 && ip4.dst == 10.0.1.11 && ip.ttl == 64 && tcp && tcp.dst == {port}",
            port::port_name("vm12")
        )
    };
    let delivered = format!("output(\"{}\")", port::port_name("vm11"));
    let mut traces = Vec::new();
    for tcp_port in [8080, 9090] {
        let trace = sbx
            .trace(
                &render::switch_name("s1"),
                &microflow(tcp_port),
                &["new", "new"],
            )
            .await;
        traces.push(trace.map(|t| t.contains(&delivered)));
    }
    // A DHCPv4 renewal by unicast to the gateway, from a port without groups, is answered.
    let renewal = format!(
        "inport == \"{}\" && eth.src == 0a:00:00:00:00:13 && eth.dst == {} && \
         ip4.src == 10.0.1.13 && ip4.dst == 10.0.1.1 && ip.ttl == 64 && udp.src == 68 && \
         udp.dst == 67",
        port::port_name("vm13"),
        render::gateway_mac("s1")
    );
    let renewal_trace = sbx
        .trace(&render::switch_name("s1"), &renewal, &["new"])
        .await;

    // The web group loses its 8081 rule.
    let removed = match &result {
        Ok(_) => Some(
            nb::converge(
                &nb,
                &[security::security_group(
                    &ApplySecurityGroupRequest {
                        security_group_id: "web".into(),
                        virtual_network_id: "v1".into(),
                        ingress: vec![
                            rule(Protocol::Tcp, Some(8080), "0.0.0.0/0"),
                            rule(Protocol::Tcp, Some(8082), "0.0.0.0/0"),
                        ],
                        egress: vec![rule(Protocol::All, None, "0.0.0.0/0")],
                    },
                    "ta",
                )],
                &Scope::Keys(BTreeSet::new()),
            )
            .await,
        ),
        Err(_) => None,
    };
    // The ExternalIP attachment is removed.
    let detached = nb::detach(
        &nb,
        ("Logical_Router", &render::router_key("v1")),
        "nat",
        ("NAT", &external::external_ip_attachment_key("e1")),
    )
    .await;
    let result = result.and_then(|(mut open, mut inbound)| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            removed.expect("phase").expect("rule removed");
            eventually("new connections to vm11:8081 are refused", || {
                (!connects(client, "10.0.1.11", 8081)).then_some(())
            });
            assert_eq!(
                open.echo("two").as_deref(),
                Some("two"),
                "the established connection was cut when its rule was removed"
            );
            assert!(
                detached.expect("detach"),
                "the attachment's NAT row was there"
            );
            eventually("new connections to 203.0.113.11:8082 are refused", || {
                (!connects(&provider_ns, "203.0.113.11", 8082)).then_some(())
            });
            assert_eq!(
                inbound.echo("two"),
                None,
                "an open session through a removed ExternalIP attachment kept passing"
            );
        }))
    });
    if result.is_err() && std::env::var_os("OVNT_KEEP").is_some() {
        eprintln!("KEEP {}", dir.path().display());
        std::thread::sleep(Duration::from_secs(400));
    }
    drop(listeners);
    drop(dhcp_clients);
    drop(dhcp6_clients);
    for v in vms.iter().chain(&dhcp_vms) {
        remove_ns(&v.ns);
    }
    sbx.stop().await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
    let traces: Vec<bool> = traces.into_iter().map(|t| t.expect("ovn-trace")).collect();
    assert_eq!(traces, [true, false], "ovn-trace: 8080 delivered, 9090 not");
    let renewal_trace = renewal_trace.expect("ovn-trace");
    assert!(
        renewal_trace.contains("put_dhcp_opts"),
        "a unicast DHCPv4 renewal was not answered: {renewal_trace}"
    );
}

/// The IPv6 address socat reports as a peer (written out in full, in brackets).
fn ipv6(peer: &str) -> std::net::Ipv6Addr {
    peer.trim_matches(['[', ']'])
        .parse()
        .unwrap_or_else(|e| panic!("peer '{peer}': {e}"))
}
