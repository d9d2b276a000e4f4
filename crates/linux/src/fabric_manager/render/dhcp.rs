//! dnsmasq files of a subnet (pure): configuration, host entries, and the lease-file parser.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{TableSite, line};

/// The sets of a VN table holding its subnets' DHCP server addresses: the gateways' IPv4
/// addresses, and their IPv6 link-local ones (DHCPv6 answers from there).
const SERVERS4: &str = "dhcp4";
const SERVERS6: &str = "dhcp6";

/// Declares a VN table's sets of DHCP server addresses (idempotent).
pub(super) fn declare_servers(t: &str) -> String {
    format!(
        "add set {t} {SERVERS4} {{ type ipv4_addr; }}\nadd set {t} {SERVERS6} {{ type ipv6_addr; }}"
    )
}

/// Adds a subnet's DHCP servers (its gateway's IPv4 address and IPv6 link-local address) to a
/// hosting cluster's VN table, so DHCP between the subnet's VMs and them passes their security
/// groups (idempotent).
pub fn add_dhcp_server(table: &str, v4: Option<Ipv4Addr>, link_local: Option<Ipv6Addr>) -> String {
    let mut s = String::new();
    if let Some(a) = v4 {
        line(
            &mut s,
            format!("add element inet {table} {SERVERS4} {{ {a} }}"),
        );
    }
    if let Some(a) = link_local {
        line(
            &mut s,
            format!("add element inet {table} {SERVERS6} {{ {a} }}"),
        );
    }
    s
}

/// DHCP exempt from security groups in a VN table's forward chains (`client`: the port's
/// egress chain, else its ingress chain): only the exchange between a VM and its subnet's own
/// DHCP server, which is link-scoped — requests to the IPv4 broadcast address or to a gateway
/// of the VN (a renewal is unicast to the server), or to `ff02::1:2`; replies from a gateway's
/// IPv4 or link-local address (a router never forwards a link-local source; ports may send no
/// server message at all, see anti-spoofing). That exchange crosses the forward
/// hook only in a hosting cluster, bridged between the VM and the VXLAN port. In the router
/// it never does — its DHCP server is reached through the input hook and answers from the
/// output hook — so the router's forward chains exempt nothing: a datagram between ports 67
/// and 68 (or 546 and 547) routed to or from anywhere meets the port's groups like any other.
pub(super) fn exemptions(s: &mut String, t: &str, chain: &str, client: bool, site: TableSite) {
    if site == TableSite::Router {
        return;
    }
    let rules = if client {
        vec![
            "meta nfproto ipv4 ip daddr 255.255.255.255 udp sport 68 udp dport 67".to_string(),
            format!("meta nfproto ipv4 ip daddr @{SERVERS4} udp sport 68 udp dport 67"),
            "meta nfproto ipv6 ip6 daddr ff02::1:2 udp sport 546 udp dport 547".to_string(),
        ]
    } else {
        vec![
            format!("meta nfproto ipv4 ip saddr @{SERVERS4} udp sport 67 udp dport 68"),
            format!("meta nfproto ipv6 ip6 saddr @{SERVERS6} udp sport 547 udp dport 546"),
        ]
    };
    for r in rules {
        line(s, format!("add rule {t} {chain} {r} accept"));
    }
}

/// One dnsmasq host entry (a line of a `dhcp-hostsdir` file): MAC → addresses, tagged `primary` when the
/// port gets the router and DNS options.
pub fn dnsmasq_host(
    mac: &str,
    v4: Option<Ipv4Addr>,
    v6: Option<Ipv6Addr>,
    primary: bool,
) -> String {
    let mut s = mac.to_string();
    if primary {
        s.push_str(",set:primary");
    }
    if let Some(a) = v4 {
        let _ = write!(s, ",{a}");
    }
    if let Some(a) = v6 {
        let _ = write!(s, ",[{a}]");
    }
    s
}

/// Inputs of a subnet's dnsmasq configuration.
#[derive(Debug, Clone)]
pub struct DnsmasqConf<'a> {
    /// The subnet bridge (the only interface served).
    pub bridge: &'a str,
    /// IPv4 prefix and gateway.
    pub ipv4: Option<(ipnet::Ipv4Net, Ipv4Addr)>,
    /// IPv6 prefix and gateway.
    pub ipv6: Option<(ipnet::Ipv6Net, Ipv6Addr)>,
    /// Segment MTU.
    pub mtu: u32,
    /// Lease time.
    pub lease_seconds: u32,
    /// DNS servers for primary ports.
    pub dns_servers: &'a [IpAddr],
    /// Host entries directory (`dhcp-hostsdir`, watched by dnsmasq with inotify).
    pub hosts_dir: &'a str,
    /// Lease file.
    pub lease_file: &'a str,
    /// Pid file.
    pub pid_file: &'a str,
    /// Log file (dnsmasq's warnings and errors).
    pub log_file: &'a str,
}

/// A subnet's dnsmasq configuration: static DHCPv4 reservations only, RA + stateful DHCPv6,
/// router and DNS only for tagged (`primary`) hosts, the MTU advertised.
pub fn dnsmasq_conf(c: &DnsmasqConf<'_>) -> String {
    let mut s = String::new();
    line(&mut s, format!("interface={}", c.bridge));
    for l in [
        "bind-dynamic",
        "except-interface=lo",
        "port=0",
        "no-resolv",
        "no-hosts",
        "dhcp-authoritative",
        // No line per DHCP transaction or RA: what a client sends stays out of the log
        // (dnsmasq still logs refusals and DECLINEs, sanitised to printable characters).
        "quiet-dhcp",
        "quiet-dhcp6",
        "quiet-ra",
    ] {
        line(&mut s, l);
    }
    line(&mut s, format!("dhcp-hostsdir={}", c.hosts_dir));
    line(&mut s, format!("dhcp-leasefile={}", c.lease_file));
    line(&mut s, format!("pid-file={}", c.pid_file));
    line(&mut s, format!("log-facility={}", c.log_file));
    // No router/DNS unless tagged primary.
    line(&mut s, "dhcp-option=option:router");
    line(&mut s, "dhcp-option=option:dns-server");
    if let Some((net, gw)) = c.ipv4 {
        line(
            &mut s,
            format!(
                "dhcp-range={},static,{},{}",
                net.network(),
                net.netmask(),
                c.lease_seconds
            ),
        );
        line(
            &mut s,
            format!("dhcp-option=tag:primary,option:router,{gw}"),
        );
        let dns4: Vec<String> = c
            .dns_servers
            .iter()
            .filter(|a| a.is_ipv4())
            .map(|a| a.to_string())
            .collect();
        if !dns4.is_empty() {
            line(
                &mut s,
                format!(
                    "dhcp-option=tag:primary,option:dns-server,{}",
                    dns4.join(",")
                ),
            );
        }
        line(&mut s, format!("dhcp-option=option:mtu,{}", c.mtu));
    }
    if let Some((net, _gw)) = c.ipv6 {
        line(
            &mut s,
            format!(
                "dhcp-range={},static,{},{}",
                net.network(),
                net.prefix_len(),
                c.lease_seconds
            ),
        );
        line(&mut s, "enable-ra");
        line(
            &mut s,
            format!("ra-param={},mtu:{},10,1800", c.bridge, c.mtu),
        );
        let dns6: Vec<String> = c
            .dns_servers
            .iter()
            .filter(|a| a.is_ipv6())
            .map(|a| format!("[{a}]"))
            .collect();
        if !dns6.is_empty() {
            line(
                &mut s,
                format!(
                    "dhcp-option=tag:primary,option6:dns-server,{}",
                    dns6.join(",")
                ),
            );
        }
    }
    s
}

/// One lease of a dnsmasq lease file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Client MAC (IPv4 leases only; IPv6 leases carry a DUID).
    pub mac: Option<String>,
    /// Leased address.
    pub address: IpAddr,
}

/// Parses a dnsmasq lease file: IPv4 lines `expiry mac ip name client-id`, then after a
/// `duid` line IPv6 lines `expiry iaid ip name duid`.
pub fn parse_leases(text: &str) -> Vec<Lease> {
    let mut out = Vec::new();
    let mut v6 = false;
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.first() == Some(&"duid") {
            v6 = true;
            continue;
        }
        if f.len() < 3 {
            continue;
        }
        let Ok(address) = f[2].parse::<IpAddr>() else {
            continue;
        };
        out.push(Lease {
            mac: if v6 {
                None
            } else {
                Some(f[1].to_ascii_lowercase())
            },
            address,
        });
    }
    out
}
