//! VLAN tags past security groups: a VM and a bare-metal server whose group lets out only
//! TCP 22 and UDP 7000 send UDP to port 5001 — untagged, and inside 802.1Q tags (VLAN 0,
//! the priority tag, and VLAN 5), an 802.1ad tag and an 802.1ad + 802.1Q stack — to a
//! neighbour's IPv4, global IPv6 and link-local addresses, and through the gateway to a VM of
//! the other subnet (IPv4 and IPv6). The neighbour and the far VM accept everything; none of
//! the UDP 5001 frames may reach them. Controls: the same untagged frames to the allowed
//! UDP 7000 arrive.
//!
//! Stopped by: the anti-spoofing chain's first type check (`ether type != { arp, ip, ip6 }
//! drop`, `render::anti_spoof`): `ether type` is the outermost type, so no tagged frame gets
//! to the rules that read the inner IP header. Mutation-checked: without that rule, the
//! 802.1Q (VLAN 0 and 5) and 802.1ad frames of both attackers reached the neighbour on all
//! three addresses and the VM's priority-tagged (VLAN 0) ones reached the far VM through the
//! gateway — the reported bypass — while the untagged copies stayed dropped by the group.

use osac_backends::Protocol;
use osac_linux::kernel;
use osac_linux::names;
use osac_linux::probe::forge::{Ipv4Frame, Ipv6Frame};

use super::{Kind, Machine, World, assert_controls_only, marker, rule};

/// Tag stacks a frame is sent with: (name, [(TPID, VLAN id)], outermost first).
const TAGS: [(&str, &[(u16, u16)]); 5] = [
    ("untagged", &[]),
    ("dot1q-vlan0", &[(0x8100, 0)]),
    ("dot1q-vlan5", &[(0x8100, 5)]),
    ("dot1ad-vlan5", &[(0x88a8, 5)]),
    ("qinq", &[(0x88a8, 5), (0x8100, 0)]),
];

/// `frame` with `tags` inserted after the two MAC addresses.
fn tagged(frame: Vec<u8>, tags: &[(u16, u16)]) -> Vec<u8> {
    let mut out = frame[..12].to_vec();
    for (tpid, vid) in tags {
        out.extend_from_slice(&tpid.to_be_bytes());
        out.extend_from_slice(&vid.to_be_bytes());
    }
    out.extend_from_slice(&frame[12..]);
    out
}

/// Untagged (or tagged) UDP frames from `a` to port `port` of the neighbour `v` (IPv4,
/// global IPv6, link-local) and, through the gateway `gw_mac`, of the far VM `far`.
fn frames(
    tag: &str,
    a: &Machine,
    v: &Machine,
    far: &Machine,
    gw_mac: [u8; 6],
    port: u16,
) -> Vec<(String, Vec<u8>)> {
    let name = |n: &str| format!("{tag}-{n}");
    vec![
        (
            name("neighbour-ipv4"),
            Ipv4Frame::new(a.mac, v.mac, a.v4, v.v4).udp(
                4000,
                port,
                &marker(&name("neighbour-ipv4")),
            ),
        ),
        (
            name("neighbour-ipv6"),
            Ipv6Frame::new(a.mac, v.mac, a.v6, v.v6).udp(
                4000,
                port,
                &marker(&name("neighbour-ipv6")),
            ),
        ),
        (
            name("neighbour-link-local"),
            Ipv6Frame::new(a.mac, v.mac, a.link_local, v.link_local).udp(
                4000,
                port,
                &marker(&name("neighbour-link-local")),
            ),
        ),
        (
            name("gateway-ipv4"),
            Ipv4Frame::new(a.mac, gw_mac, a.v4, far.v4).udp(
                4000,
                port,
                &marker(&name("gateway-ipv4")),
            ),
        ),
        (
            name("gateway-ipv6"),
            Ipv6Frame::new(a.mac, gw_mac, a.v6, far.v6).udp(
                4000,
                port,
                &marker(&name("gateway-ipv6")),
            ),
        ),
    ]
}

#[tokio::test]
async fn tagged_frames_from_a_workload_never_pass() {
    if !super::common::ready().await {
        return;
    }
    let w = World::new(23).await;
    let everything = |p| vec![rule(p, None, "0.0.0.0/0"), rule(p, None, "::/0")];
    let narrow = w
        .security_group(
            "narrow",
            "va",
            everything(Protocol::All),
            vec![
                rule(Protocol::Tcp, Some((22, 22)), "0.0.0.0/0"),
                rule(Protocol::Tcp, Some((22, 22)), "::/0"),
                rule(Protocol::Udp, Some((7000, 7000)), "0.0.0.0/0"),
                rule(Protocol::Udp, Some((7000, 7000)), "::/0"),
            ],
        )
        .await;
    let open = w
        .security_group(
            "open",
            "va",
            everything(Protocol::All),
            everything(Protocol::All),
        )
        .await;
    let (evil, evil_bm) = w.vm_and_bm("evil", "evilbm", "a1", &[narrow]).await;
    let v = w
        .machine("vict", Kind::Vm, "a1", std::slice::from_ref(&open))
        .await;
    let far = w
        .machine("far", Kind::Vm, "a2", std::slice::from_ref(&open))
        .await;
    let gw_mac = osac_linux::probe::capture::parse_mac(&kernel::bridge_mac(
        &names::router_ns(&w.id("va")),
        &names::subnet_bridge(&w.id("a1")),
    ))
    .unwrap();
    // Neighbour caches warm (the far VM's and the router's), so routed frames are not held
    // back by address resolution.
    for (a, to) in [(&evil, far.v4), (&far, evil.v4), (&evil_bm, far.v4)] {
        let _ = osac_linux::probe::ping(&a.ns, to.into(), std::time::Duration::from_millis(300));
    }
    let caps = [
        ("the neighbour", v.capture()),
        ("the far VM", far.capture()),
    ];
    let (mut attacks, mut controls) = (Vec::new(), Vec::new());
    for (who, a) in [("vm", &evil), ("bm", &evil_bm)] {
        for (tname, tags) in TAGS {
            for (n, f) in frames(&format!("{who}-{tname}-udp5001"), a, &v, &far, gw_mac, 5001) {
                a.send(tagged(f, tags));
                attacks.push(n);
            }
        }
        for (n, f) in frames(&format!("{who}-ok-udp7000"), a, &v, &far, gw_mac, 7000) {
            a.send(f);
            controls.push(n);
        }
    }
    assert_controls_only(
        &caps,
        &controls,
        &attacks,
        "allowed frames",
        "frames outside the group passed",
    );
    w.env.teardown().await;
}
