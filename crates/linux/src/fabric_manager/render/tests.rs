use super::*;

fn rule(p: Protocol, ports: Option<(u16, u16)>, cidr: &str) -> SecurityRule {
    SecurityRule {
        protocol: p,
        port_from: ports.map(|p| p.0),
        port_to: ports.map(|p| p.1),
        cidr: cidr.parse().unwrap(),
    }
}

#[test]
fn router_table_has_nat_guard_and_stateful_sg_hooks() {
    let s = vn_table("osac-x", TableSite::Router);
    assert!(s.contains("add rule inet osac-x sgout ct state established,related accept"));
    assert!(s.contains("add rule inet osac-x sgout ct state invalid drop"));
    // Every packet of a port: egress by sender MAC, bridged ingress by output-port mark,
    // routed ingress by address — in that order.
    assert!(s.contains("add rule inet osac-x sgout ether saddr vmap @egmac"));
    let mark = s
        .find("add rule inet osac-x sgin meta mark vmap @inport")
        .unwrap();
    let addr = s
        .find("add rule inet osac-x sgin ip6 daddr vmap @in6")
        .unwrap();
    assert!(mark < addr);
    assert!(!s.contains("eg4"), "no address-keyed egress any more");
    // Nothing DHCP is exempt in the router's forward chains: its server is reached through
    // input, and a datagram between DHCP ports routed anywhere meets the groups.
    assert!(
        !s.lines()
            .any(|l| l.starts_with("add rule inet osac-x sg") && l.contains("udp")),
        "{s}"
    );
    assert!(s.contains("dnatpre dnat ip to ip daddr map @dnat4"));
    assert!(s.contains("guard iifname \"up0\" drop"));
    assert!(s.contains("natpost oifname \"up0\" masquerade"));
    // The router's own input: VXLAN only from the underlay, nothing new from the uplink,
    // the gateway's services from the subnets, then drop.
    assert!(s.contains("hostin iifname \"ul\" udp dport 4789 accept"));
    assert!(s.contains("hostin iifname \"ul\" drop"));
    assert!(s.contains("hostin iifname \"up0\" drop"));
    assert!(s.contains("hostin meta nfproto ipv4 udp dport 67 accept"));
    assert!(s.contains("icmp type echo-request fib daddr . iif type local accept"));
    assert!(
        s.ends_with("add rule inet osac-x hostin drop\n")
            || s.contains("add rule inet osac-x hostin drop\n")
    );
    assert!(
        !s.contains("iifname != @brs"),
        "a router filters routed traffic too"
    );
    // Base chains are flushed before their rules are re-added: re-running never duplicates.
    let flush = s.find("flush chain inet osac-x sgout").unwrap();
    let first_rule = s.find("add rule inet osac-x sgout").unwrap();
    assert!(flush < first_rule);
}

#[test]
fn neighbour_discovery_is_exempt_only_on_link_and_never_routed() {
    for site in [TableSite::Router, TableSite::Hosting] {
        let s = vn_table("t", site);
        for chain in ["sgout", "sgin"] {
            assert!(s.contains(&format!(
                "add rule inet t {chain} meta l4proto ipv6-icmp ip6 hoplimit 255 icmpv6 type {{ nd-neighbor-solicit"
            )));
        }
        for chain in ["sgout", "sgin"] {
            assert!(!s.contains(&format!(
                "{chain} meta l4proto ipv6-icmp icmpv6 type {{ nd-neighbor-solicit"
            )));
        }
    }
    let s = vn_table("t", TableSite::Router);
    let nd = s
        .find("add rule inet t guard meta l4proto ipv6-icmp icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect } ip6 hoplimit != 255 drop")
        .expect("routed ND dropped");
    assert!(s.contains("add rule inet t guard oifname \"up0\" ct state untracked drop"));
    assert!(s.contains("add rule inet t guard oifname \"up0\" ip daddr 169.254.0.0/16 drop"));
    assert!(s.contains("add rule inet t guard oifname \"up0\" ip6 saddr fe80::/10 drop"));
    // Before anything from the uplink is accepted.
    assert!(
        nd < s
            .find("guard iifname \"up0\" ct state established")
            .unwrap()
    );
}

#[test]
fn each_port_counts_its_connections() {
    let s = vn_table("t", TableSite::Hosting);
    assert!(s.contains("add set inet t ctport { type ether_addr; flags dynamic; size 65536; }"));
    let keys = PortKeys {
        mac: "02:00:00:00:00:01".into(),
        mark: 7,
        v4: None,
        v6: None,
    };
    for sgs in [vec![], vec!["a".to_string()]] {
        let p = port_sg("t", "pabc", &sgs, &keys);
        let limit = p
            .find(&format!(
                "add rule inet t e-pabc ct state new add @ctport {{ ether saddr ct count over {PORT_CONNECTION_LIMIT} }} drop"
            ))
            .expect("limit");
        assert!(limit < p.find("add rule inet t e-pabc drop").unwrap());
    }
}

#[test]
fn hosting_table_only_acts_on_its_vn_bridges() {
    let s = vn_table("osac-x", TableSite::Hosting);
    assert!(s.contains("add rule inet osac-x sgout iifname != @brs accept"));
    assert!(!s.contains("dnat"));
    assert!(!s.contains("masquerade"));
}

#[test]
fn hosting_table_exempts_only_dhcp_between_a_vm_and_its_subnets_server() {
    let s = vn_table("osac-x", TableSite::Hosting);
    assert!(s.contains("add set inet osac-x dhcp4 { type ipv4_addr; }\n"));
    assert!(s.contains("add set inet osac-x dhcp6 { type ipv6_addr; }\n"));
    // Requests: broadcast, unicast to a gateway of the VN, or the DHCPv6 servers' group.
    for r in [
        "sgout meta nfproto ipv4 ip daddr 255.255.255.255 udp sport 68 udp dport 67 accept",
        "sgout meta nfproto ipv4 ip daddr @dhcp4 udp sport 68 udp dport 67 accept",
        "sgout meta nfproto ipv6 ip6 daddr ff02::1:2 udp sport 546 udp dport 547 accept",
        // Replies: from a gateway's address, IPv4 or link-local (never routed).
        "sgin meta nfproto ipv4 ip saddr @dhcp4 udp sport 67 udp dport 68 accept",
        "sgin meta nfproto ipv6 ip6 saddr @dhcp6 udp sport 547 udp dport 546 accept",
    ] {
        assert!(
            s.contains(&format!("add rule inet osac-x {r}\n")),
            "{r}\n{s}"
        );
    }
    assert_eq!(
        s.matches("udp sport 6").count(),
        3,
        "no other DHCP exemption"
    );
    assert_eq!(
        s.matches("udp sport 54").count(),
        2,
        "no other DHCPv6 exemption"
    );
    assert_eq!(
        add_dhcp_server(
            "osac-x",
            Some("10.0.1.1".parse().unwrap()),
            Some("fe80::1".parse().unwrap())
        ),
        "add element inet osac-x dhcp4 { 10.0.1.1 }\nadd element inet osac-x dhcp6 { fe80::1 }\n"
    );
    assert_eq!(add_dhcp_server("osac-x", None, None), "");
}

#[test]
fn hosting_table_puts_its_vn_in_its_own_conntrack_zone() {
    let s = vn_table("osac-x", TableSite::Hosting);
    let zone = crate::names::ct_zone("osac-x");
    assert!(s.contains(
        "add chain inet osac-x zone { type filter hook prerouting priority raw; policy accept; }"
    ));
    assert!(s.contains(&format!(
        "flush chain inet osac-x zone\nadd rule inet osac-x zone iifname @brs ct zone set {zone}\n"
    )));
    assert!(
        !vn_table("osac-y", TableSite::Hosting).contains(&format!("ct zone set {zone}\n")),
        "another VN, another zone"
    );
    assert!(
        !vn_table("osac-x", TableSite::Router).contains("ct zone"),
        "a router holds one VN"
    );
}

#[test]
fn rules_render_per_direction_family_and_protocol() {
    assert_eq!(
        rule_match(&rule(Protocol::Tcp, Some((22, 22)), "0.0.0.0/0"), true),
        "ip saddr 0.0.0.0/0 tcp dport 22"
    );
    assert_eq!(
        rule_match(
            &rule(Protocol::Udp, Some((1000, 2000)), "10.0.0.0/8"),
            false
        ),
        "ip daddr 10.0.0.0/8 udp dport 1000-2000"
    );
    assert_eq!(
        rule_match(&rule(Protocol::Icmp, None, "::/0"), true),
        "ip6 saddr ::/0 meta l4proto ipv6-icmp"
    );
    assert_eq!(
        rule_match(&rule(Protocol::Icmp, None, "0.0.0.0/0"), true),
        "ip saddr 0.0.0.0/0 meta l4proto icmp"
    );
    assert_eq!(
        rule_match(&rule(Protocol::All, None, "fd00::/8"), false),
        "ip6 daddr fd00::/8"
    );
    assert_eq!(
        rule_match(&rule(Protocol::Tcp, None, "0.0.0.0/0"), true),
        "ip saddr 0.0.0.0/0 meta l4proto tcp"
    );
}

#[test]
fn group_update_is_one_flush_and_refill() {
    let s = sg_chains(
        "t",
        "sg-1",
        &[rule(Protocol::Tcp, Some((22, 22)), "0.0.0.0/0")],
        &[],
    );
    let i = crate::names::sg_chain("sg-1", true);
    let e = crate::names::sg_chain("sg-1", false);
    assert!(s.contains(&format!(
        "flush chain inet t {i}\nadd rule inet t {i} ip saddr 0.0.0.0/0 tcp dport 22 accept"
    )));
    assert!(s.contains(&format!("flush chain inet t {e}\n")));
    assert!(
        !s.contains(&format!("add rule inet t {e}")),
        "no egress rule = nothing allowed"
    );
}

#[test]
fn port_chains_union_groups_then_drop() {
    let keys = PortKeys {
        mac: "02:00:00:00:00:01".into(),
        mark: 7,
        v4: Some("10.0.1.2".parse().unwrap()),
        v6: None,
    };
    let s = port_sg("t", "pabc", &["a".into(), "b".into()], &keys);
    assert!(s.contains(&format!(
        "add rule inet t e-pabc jump {}",
        crate::names::sg_chain("a", false)
    )));
    assert!(s.contains(&format!(
        "add rule inet t e-pabc jump {}",
        crate::names::sg_chain("b", false)
    )));
    assert!(s.ends_with("add rule inet t i-pabc drop\n"));
    assert!(s.contains("add element inet t egmac { 02:00:00:00:00:01 : jump e-pabc }"));
    assert!(s.contains("add element inet t inport { 0x00000007 : jump i-pabc }"));
    assert!(s.contains("add element bridge osac portmark { \"pabc\" : 0x00000007 }"));
    assert!(s.contains("add element inet t in4 { 10.0.1.2 : jump i-pabc }"));
    assert!(!s.contains("in6"));
    // No groups: a closed port — steered like any other, to chains that only drop.
    let closed = port_sg("t", "pabc", &[], &keys);
    assert!(closed.contains("add element inet t egmac { 02:00:00:00:00:01 : jump e-pabc }"));
    assert!(closed.contains("add element inet t inport { 0x00000007 : jump i-pabc }"));
    assert!(closed.contains("add element inet t in4 { 10.0.1.2 : jump i-pabc }"));
    assert!(closed.contains("add element bridge osac portmark { \"pabc\" : 0x00000007 }"));
    assert!(closed.ends_with("add rule inet t e-pabc drop\nadd rule inet t i-pabc drop\n"));
    assert!(!closed.contains("jump g-") && !closed.contains("delete"));
    let gone = delete_port_sg("t", "pabc", &keys);
    assert!(gone.contains("delete element inet t egmac { 02:00:00:00:00:01 }"));
    assert!(gone.contains("delete element bridge osac portmark { \"pabc\" }"));
    assert!(gone.contains("delete chain inet t e-pabc"));
    // Declared before deleted: a second removal does not fail on a missing element.
    assert!(
        gone.find("add element inet t inport { 0x00000007 : jump i-pabc }")
            .unwrap()
            < gone.find("delete element inet t inport").unwrap()
    );
}

#[test]
fn vip_chains_union_claimant_groups_and_go_with_the_last_claimant() {
    let vip: IpAddr = "10.0.1.241".parse().unwrap();
    let i = crate::names::vip_chain(&vip, true);
    let s = vip_sg("t", vip, Some(&["a".into(), "b".into()]));
    assert!(s.contains(&format!(
        "add element inet t in4 {{ 10.0.1.241 : jump {i} }}"
    )));
    assert!(
        !s.contains("eg4"),
        "egress from a VIP is its sender's (keyed by MAC)"
    );
    for g in ["a", "b"] {
        assert!(s.contains(&format!(
            "add rule inet t {i} jump {}",
            crate::names::sg_chain(g, true)
        )));
    }
    assert!(s.contains(&format!("flush chain inet t {i}\n")));
    assert!(s.ends_with(&format!("add rule inet t {i} drop\n")));
    assert!(!s.contains("delete"));
    // Claimants, none with groups: closed like their ports.
    let closed = vip_sg("t", vip, Some(&[]));
    assert!(closed.contains(&format!(
        "add element inet t in4 {{ 10.0.1.241 : jump {i} }}"
    )));
    assert!(closed.ends_with(&format!("flush chain inet t {i}\nadd element inet t in4 {{ 10.0.1.241 : jump {i} }}\nadd rule inet t {i} drop\n")));
    // No claimant left: the address is no longer steered.
    let gone = vip_sg("t", vip, None);
    assert!(gone.contains("delete element inet t in4 { 10.0.1.241 }"));
    assert!(gone.contains(&format!("delete chain inet t {i}")));
    assert!(!gone.contains("jump g-"));
    let v6 = vip_sg("t", "fd00::f1".parse().unwrap(), Some(&["a".into()]));
    assert!(v6.contains("add element inet t in6 { fd00::f1 : jump"));
}

#[test]
fn anti_spoofing_pins_mac_and_addresses() {
    let id = PortIdentity {
        mac: "02:00:00:00:00:01".into(),
        ipv4: vec![
            "10.0.1.2/32".parse().unwrap(),
            "10.0.1.241/32".parse().unwrap(),
        ],
        ipv6: vec![
            "fd00::2/128".parse().unwrap(),
            "fd00::f0/124".parse().unwrap(),
        ],
        gateway_link_local: Some("fe80::11:22ff:fe33:4455".parse().unwrap()),
    };
    let s = anti_spoof("pabc", &id);
    // The gateway's link-local is inside fe80::/10 but never usable by a port.
    assert!(s.contains("ip6 saddr fe80::11:22ff:fe33:4455 drop"));
    assert!(s.contains(
        "icmpv6 type nd-neighbor-advert @th,64,128 0xfe80000000000000001122fffe334455 drop"
    ));
    assert!(
        s.find("ip6 saddr fe80::11:22ff:fe33:4455 drop").unwrap() < s.find("ip6 saddr {").unwrap(),
        "checked before the source accept"
    );
    assert!(s.contains("ether saddr != 02:00:00:00:00:01 drop"));
    assert!(s.contains("arp saddr ip != { 10.0.1.2/32, 10.0.1.241/32, 0.0.0.0 } drop"));
    assert!(s.contains("ip saddr { 10.0.1.2/32, 10.0.1.241/32 } accept"));
    // Server ports and RAs are found behind IPv6 extension headers too (`meta l4proto`
    // walks them); a header chain the kernel cannot walk never reaches the accept.
    assert!(s.contains("meta l4proto udp udp sport { 67, 547 } drop"));
    assert!(
        s.contains("meta l4proto ipv6-icmp icmpv6 type { nd-router-advert, nd-redirect } drop")
    );
    assert!(!s.contains("nexthdr"));
    assert!(s.contains(
        "ip6 saddr { fd00::2/128, fd00::f0/124, fe80::/10, ::/128 } meta l4proto != 255 accept"
    ));
    // Neighbour advertisements: target (ICMPv6 bytes 8..24) link-local or one of its own.
    assert!(s.contains(
        "icmpv6 type nd-neighbor-advert @th,64,10 != 0x3fa @th,64,128 != { \
         0xfd000000000000000000000000000002, \
         0xfd0000000000000000000000000000f0-0xfd0000000000000000000000000000ff } drop"
    ));
    assert!(
        s.find("nd-neighbor-advert").unwrap() < s.find("ip6 saddr {").unwrap(),
        "checked before the source accept"
    );
    assert!(s.contains("ports { \"pabc\" : jump as-pabc }"));
    // The DHCP-server drop comes before any accept of the port's own address.
    assert!(s.find("udp sport { 67, 547 } drop").unwrap() < s.find("ip saddr {").unwrap());
    // Tagged frames (802.1Q, 802.1ad: the outermost type) never reach a rule reading IP.
    let untagged = s
        .find("add rule bridge osac as-pabc ether type != { arp, ip, ip6 } drop")
        .unwrap();
    assert!(untagged < s.find("arp saddr ether").unwrap());
    // DHCP: a client's messages about this port only, whatever the ports used.
    for r in [
        "meta l4proto udp udp dport { 68, 546 } drop",
        "meta l4proto udp udp dport 67 udp length < 244 drop",
        "meta l4proto udp udp dport 67 ip frag-off & 0x3fff != 0 drop",
        "meta l4proto udp udp dport 67 @th,64,24 != 0x010106 drop",
        "meta l4proto udp udp dport 67 @th,256,32 != 0 drop",
        "meta l4proto udp udp dport 67 @th,288,48 != 0x020000000001 drop",
        "meta l4proto udp udp dport 547 udp length < 12 drop",
        "meta l4proto udp udp dport 547 exthdr frag exists drop",
        "meta l4proto udp udp dport 547 @th,64,8 != { 1, 3, 4, 5, 6, 8, 9, 11 } drop",
        "meta l4proto udp udp dport { 67, 547 } limit rate over 10/second burst 20 packets drop",
    ] {
        let at = s.find(r).unwrap_or_else(|| panic!("{r}\n{s}"));
        assert!(
            at < s.find("ip saddr {").unwrap(),
            "{r}: before the accepts"
        );
    }
    let v6only = anti_spoof(
        "pabc",
        &PortIdentity {
            ipv4: vec![],
            ..id.clone()
        },
    );
    assert!(!v6only.contains("ip saddr {"), "no empty IPv4 set");
    let v4only = anti_spoof("pabc", &PortIdentity { ipv6: vec![], ..id });
    assert!(
        v4only.contains("icmpv6 type nd-neighbor-advert @th,64,10 != 0x3fa drop"),
        "without IPv6 addresses only link-local targets"
    );
}

#[test]
fn snat_uses_only_sources_of_the_gateway_family() {
    let sources: Vec<IpNet> = vec!["10.0.0.0/16".parse().unwrap(), "fd00::/48".parse().unwrap()];
    let s = snat("t", Some(("198.51.100.5".parse().unwrap(), &sources)));
    assert!(s.contains("oifname \"up0\" ip saddr { 10.0.0.0/16 } snat ip to 198.51.100.5"));
    assert!(!s.contains("fd00"));
    assert_eq!(
        snat("t", None),
        "add chain inet t natgw\nflush chain inet t natgw\n"
    );
}

#[test]
fn dnat_add_and_idempotent_remove() {
    let a: IpAddr = "198.51.100.7".parse().unwrap();
    assert_eq!(
        dnat("t", a, Some("10.0.1.2".parse().unwrap())),
        "add element inet t dnat4 { 198.51.100.7 : 10.0.1.2 }\n"
    );
    assert_eq!(
        dnat("t", a, None),
        "delete element inet t dnat4 { 198.51.100.7 }\n"
    );
    assert!(dnat("t", "2001:db8::1".parse().unwrap(), None).contains("dnat6"));
}

#[test]
fn dnsmasq_gives_router_and_dns_only_to_primary_ports() {
    let dns: Vec<IpAddr> = vec!["10.0.1.1".parse().unwrap(), "fd00::1".parse().unwrap()];
    let c = dnsmasq_conf(&DnsmasqConf {
        bridge: "bx",
        ipv4: Some(("10.0.1.0/24".parse().unwrap(), "10.0.1.1".parse().unwrap())),
        ipv6: Some(("fd00:1::/64".parse().unwrap(), "fd00:1::1".parse().unwrap())),
        mtu: 1450,
        lease_seconds: 3600,
        dns_servers: &dns,
        hosts_dir: "/s/h.d",
        lease_file: "/s/l",
        pid_file: "/s/p",
        log_file: "/s/log",
    });
    assert!(c.contains("interface=bx\n"));
    assert!(
        c.contains("dhcp-hostsdir=/s/h.d\n") && !c.contains("dhcp-hostsfile"),
        "host entries come from a watched directory (no SIGHUP reloads)"
    );
    assert!(c.contains("dhcp-range=10.0.1.0,static,255.255.255.0,3600"));
    assert!(c.contains("dhcp-range=fd00:1::,static,64,3600"));
    assert!(c.contains("enable-ra"));
    // No line per DHCP transaction or RA: clients' words stay out of the log.
    for q in ["quiet-dhcp\n", "quiet-dhcp6\n", "quiet-ra\n"] {
        assert!(c.contains(q), "{q}");
    }
    assert!(!c.contains("log-dhcp"));
    assert!(
        c.contains("dhcp-option=option:router\n"),
        "untagged hosts get no router"
    );
    assert!(c.contains("dhcp-option=tag:primary,option:router,10.0.1.1"));
    assert!(c.contains("dhcp-option=tag:primary,option:dns-server,10.0.1.1"));
    assert!(c.contains("dhcp-option=tag:primary,option6:dns-server,[fd00::1]"));
    assert!(c.contains("dhcp-option=option:mtu,1450"));
    assert_eq!(
        dnsmasq_host(
            "02:00:00:00:00:01",
            Some("10.0.1.2".parse().unwrap()),
            Some("fd00:1::2".parse().unwrap()),
            true
        ),
        "02:00:00:00:00:01,set:primary,10.0.1.2,[fd00:1::2]"
    );
    assert_eq!(
        dnsmasq_host(
            "02:00:00:00:00:01",
            Some("10.0.1.2".parse().unwrap()),
            None,
            false
        ),
        "02:00:00:00:00:01,10.0.1.2"
    );
}

#[test]
fn lease_file_parses_both_families() {
    let text = "1700000000 02:00:00:00:00:01 10.0.1.2 vm1 01:02:00:00:00:00:01\n\
                duid 00:01:00:01:2c:aa:bb:cc:02:00:00:00:00:ff\n\
                1700000000 1234 fd00:1::2 vm1 00:03:00:01:02:00:00:00:00:01\n";
    let l = parse_leases(text);
    assert_eq!(l.len(), 2);
    assert_eq!(l[0].mac.as_deref(), Some("02:00:00:00:00:01"));
    assert_eq!(l[0].address, "10.0.1.2".parse::<IpAddr>().unwrap());
    assert_eq!(l[1].mac, None);
    assert_eq!(l[1].address, "fd00:1::2".parse::<IpAddr>().unwrap());
}

#[test]
fn l2_infrastructure_namespaces_answer_nothing() {
    let s = l2_guard_table();
    for (chain, hook, dir) in [
        ("hostin", "input", "iifname"),
        ("hostout", "output", "oifname"),
    ] {
        assert!(s.contains(&format!(
            "add chain inet osac-guard {chain} {{ type filter hook {hook} priority 0; policy drop; }}"
        )));
        assert!(s.contains(&format!(
            "add rule inet osac-guard {chain} {dir} {{ \"lo\", \"ul\" }} accept"
        )));
    }
}

#[test]
fn bridge_table_marks_frames_by_output_port() {
    let s = bridge_table();
    assert!(s.contains(
        "add chain bridge osac markout { type filter hook forward priority -200; policy accept; }"
    ));
    assert!(s.contains("add rule bridge osac markout meta mark set oifname map @portmark"));
}
