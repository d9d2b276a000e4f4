use super::*;
use crate::probe::dissect::dissect;
use crate::probe::forge::{NH_DEST_OPTS, NH_FRAGMENT, NH_HOP_BY_HOP, PROTO_ICMPV6, PROTO_UDP};

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x66];

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// The ND options after a fixed message part of `fixed` bytes, as (type, bytes).
fn nd_options(body: &[u8], fixed: usize) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = &body[fixed..];
    while !rest.is_empty() {
        let len = usize::from(rest[1]) * 8;
        assert!(
            len > 0 && len <= rest.len(),
            "option length within the message"
        );
        out.push((rest[0], rest[2..len].to_vec()));
        rest = &rest[len..];
    }
    out
}

#[test]
fn router_advert_layout() {
    let mut ra = RouterAdvert::new(MAC, v6("fe80::66"), v6("2001:db8:bad::"), 64);
    ra.marker = b"EVIL-RA".to_vec();
    let f = ra.encode();
    assert_eq!(&f[..6], &[0x33, 0x33, 0, 0, 0, 1]);
    assert_eq!(&f[6..12], &MAC);
    let d = dissect(&f).unwrap();
    assert_eq!(d.src_ip, v6("fe80::66"));
    assert_eq!(d.dst_ip, ALL_NODES);
    assert_eq!(d.ttl, 255, "hop limit");
    assert_eq!(d.icmpv6_type(), Some((ICMPV6_ROUTER_ADVERT, 0)));
    assert!(d.checksum_ok());
    let body = d.payload();
    assert_eq!(
        &body[..4],
        &[64, 0, 0x07, 0x08],
        "hop limit, flags, lifetime 1800"
    );
    let opts = nd_options(body, 12);
    assert_eq!(opts.len(), 3);
    let (kind, pi) = &opts[0];
    assert_eq!((*kind, pi.len()), (3, 30), "prefix information is 32 bytes");
    assert_eq!((pi[0], pi[1]), (64, 0xc0), "length, L and A");
    assert_eq!(&pi[2..6], &86_400u32.to_be_bytes());
    assert_eq!(&pi[14..], &v6("2001:db8:bad::").octets());
    assert_eq!(opts[1], (1, MAC.to_vec()), "source link-layer address");
    assert_eq!(opts[2].0, ND_OPT_MARKER);
    assert!(opts[2].1.starts_with(b"EVIL-RA"));
}

#[test]
fn router_advert_flags_and_extension_headers() {
    let mut ra = RouterAdvert::new(MAC, v6("fe80::66"), v6("2001:db8::"), 64);
    ra.managed = true;
    ra.other = true;
    ra.router_lifetime = 0;
    ra.prefixes.clear();
    ra.ext = vec![ExtHeader::hop_by_hop(), ExtHeader::atomic_fragment(9)];
    let f = ra.encode();
    let d = dissect(&f).unwrap();
    assert_eq!(d.ext, vec![NH_HOP_BY_HOP, NH_FRAGMENT]);
    assert_eq!(d.proto, PROTO_ICMPV6);
    assert!(d.checksum_ok());
    assert_eq!(&d.payload()[..4], &[64, 0xc0, 0, 0]);
    assert_eq!(nd_options(d.payload(), 12), vec![(1, MAC.to_vec())]);
}

#[test]
fn neighbour_advert_layout() {
    let victim = v6("fd00::5");
    let mut na = NeighbourAdvert::unsolicited(MAC, victim, victim);
    na.marker = b"EVIL-NA".to_vec();
    na.ext = vec![ExtHeader::dest_opts()];
    let f = na.encode();
    assert_eq!(&f[..6], &[0x33, 0x33, 0, 0, 0, 1]);
    let d = dissect(&f).unwrap();
    assert_eq!(d.ext, vec![NH_DEST_OPTS]);
    assert_eq!(d.ttl, 255);
    assert_eq!(d.icmpv6_type(), Some((ICMPV6_NEIGHBOUR_ADVERT, 0)));
    assert!(d.checksum_ok());
    let body = d.payload();
    assert_eq!(&body[..4], &[0x20, 0, 0, 0], "override only");
    assert_eq!(&body[4..20], &victim.octets());
    let opts = nd_options(body, 20);
    assert_eq!(opts[0], (2, MAC.to_vec()), "target link-layer address");
    assert_eq!(opts[1].0, ND_OPT_MARKER);
    assert_eq!(&opts[1].1[..7], b"EVIL-NA");
    na.router = true;
    na.solicited = true;
    na.override_flag = false;
    assert_eq!(dissect(&na.encode()).unwrap().payload()[0], 0xc0);
}

#[test]
fn dhcpv6_server_message_layout() {
    let m = dhcpv6_server_message(DHCPV6_REPLY, 0x00ab_cdef, MAC, b"DHCP6-MARK");
    assert_eq!(&m[..4], &[7, 0xab, 0xcd, 0xef]);
    assert_eq!(&m[4..8], &[0, 2, 0, 10], "server identifier, 10 bytes");
    assert_eq!(&m[8..14], &[0, 3, 0, 1, 2, 0], "DUID-LL, ethernet");
    assert_eq!(&m[12..18], &MAC);
    let vendor = &m[18..];
    assert_eq!(&vendor[..2], &[0, 17]);
    assert_eq!(
        usize::from(u16::from_be_bytes([vendor[2], vendor[3]])),
        vendor.len() - 4
    );
    assert_eq!(&vendor[4..8], &MARKER_ENTERPRISE.to_be_bytes());
    assert_eq!(&vendor[8..12], &[0, 1, 0, 10]);
    assert_eq!(&vendor[12..], b"DHCP6-MARK");
    assert_eq!(
        dhcpv6_server_message(DHCPV6_ADVERTISE, 1, MAC, b"").len(),
        18,
        "no vendor option without a marker"
    );
}

#[test]
fn dhcpv6_server_frame_behind_extension_headers() {
    let ip = Ipv6Frame::new(MAC, [2, 0, 0, 0, 0, 5], v6("fe80::66"), v6("fe80::5"))
        .with_ext(ExtHeader::hop_by_hop())
        .with_ext(ExtHeader::dest_opts());
    let f = dhcpv6_server_frame(&ip, DHCPV6_ADVERTISE, 42, b"ROGUE");
    let d = dissect(&f).unwrap();
    assert_eq!(d.ext, vec![NH_HOP_BY_HOP, NH_DEST_OPTS]);
    assert_eq!(d.proto, PROTO_UDP);
    assert_eq!(d.ports(), Some((547, 546)));
    assert!(d.checksum_ok());
    assert_eq!(d.payload(), dhcpv6_server_message(2, 42, MAC, b"ROGUE"));
}

#[test]
fn dhcpv4_reply_layout() {
    let client = [2, 0, 0, 0, 0, 5];
    let mut r = Dhcp4Reply::new(
        DHCPOFFER,
        0x1234_5678,
        client,
        Ipv4Addr::new(10, 0, 1, 50),
        Ipv4Addr::new(10, 0, 1, 66),
    );
    r.marker = vec![b'x'; 300];
    let p = r.payload();
    assert_eq!(&p[..4], &[2, 1, 6, 0], "BOOTREPLY, ethernet");
    assert_eq!(&p[4..8], &0x1234_5678u32.to_be_bytes());
    assert_eq!(&p[16..20], &[10, 0, 1, 50], "yiaddr");
    assert_eq!(&p[20..24], &[10, 0, 1, 66], "siaddr");
    assert_eq!(&p[28..34], &client, "chaddr");
    assert_eq!(&p[236..240], &[99, 130, 83, 99], "magic cookie");
    assert_eq!(&p[240..243], &[53, 1, DHCPOFFER]);
    // Walk the options up to the end option.
    let (mut at, mut marker, mut codes) = (240, Vec::new(), Vec::new());
    while p[at] != 255 {
        let len = usize::from(p[at + 1]);
        codes.push(p[at]);
        if p[at] == 224 {
            marker.extend_from_slice(&p[at + 2..at + 2 + len]);
        }
        at += 2 + len;
    }
    assert_eq!(codes, vec![53, 54, 51, 1, 3, 224, 224]);
    assert_eq!(marker, vec![b'x'; 300]);
    r.marker.clear();
    r.msg_type = DHCPACK;
    assert_eq!(r.payload().len(), 300, "BOOTP minimum");
    let ip = Ipv4Frame::new(
        MAC,
        [0xff; 6],
        Ipv4Addr::new(10, 0, 1, 66),
        Ipv4Addr::BROADCAST,
    );
    let f = r.frame(&ip);
    let d = dissect(&f).unwrap();
    assert_eq!(d.ports(), Some((67, 68)));
    assert!(d.ip_checksum_ok && d.checksum_ok());
    assert_eq!(d.payload()[242], DHCPACK);
}
