//! Wire-format tests of the DHCPv6 messages.

use super::*;

const MAC: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 7];
const ADDR: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 0x23);

fn status_opt(code: u16, text: &str) -> Vec<u8> {
    let mut d = code.to_be_bytes().to_vec();
    d.extend_from_slice(text.as_bytes());
    d
}

/// Builds a server message the way dnsmasq lays one out.
fn server_bytes(kind: u8, xid: u32, ia: Option<Vec<u8>>, extra: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut b = vec![kind];
    b.extend_from_slice(&xid.to_be_bytes()[1..]);
    push_opt(&mut b, OPT_CLIENTID, &duid_ll(&MAC));
    push_opt(
        &mut b,
        OPT_SERVERID,
        &[0, 1, 0, 1, 9, 9, 9, 9, 2, 0, 0, 0, 0, 1],
    );
    if let Some(ia) = ia {
        push_opt(&mut b, OPT_IA_NA, &ia);
    }
    for (c, d) in extra {
        push_opt(&mut b, *c, d);
    }
    b
}

fn ia_bytes(t1: u32, t2: u32, addr: Option<(Ipv6Addr, u32, u32)>, st: Option<u16>) -> Vec<u8> {
    let mut ia = iaid_of(&MAC).to_be_bytes().to_vec();
    ia.extend_from_slice(&t1.to_be_bytes());
    ia.extend_from_slice(&t2.to_be_bytes());
    if let Some((a, p, v)) = addr {
        let mut d = a.octets().to_vec();
        d.extend_from_slice(&p.to_be_bytes());
        d.extend_from_slice(&v.to_be_bytes());
        push_opt(&mut ia, OPT_IAADDR, &d);
    }
    if let Some(code) = st {
        push_opt(&mut ia, OPT_STATUS_CODE, &status_opt(code, "text"));
    }
    ia
}

fn solicit() -> ClientMessage {
    ClientMessage {
        message_type: MessageType::Solicit,
        xid: 0x00ab_cdef,
        client_id: duid_ll(&MAC),
        server_id: None,
        iaid: iaid_of(&MAC),
        address: None,
        elapsed_cs: 0,
    }
}

#[test]
fn duid_ll_is_type_3_ethernet_and_the_mac() {
    assert_eq!(duid_ll(&MAC), vec![0, 3, 0, 1, 0x02, 0xaa, 0, 0, 0, 7]);
    assert_eq!(iaid_of(&MAC), 0x0000_0007);
}

#[test]
fn solicit_layout() {
    let b = solicit().encode();
    let mut want = vec![1, 0xab, 0xcd, 0xef];
    want.extend_from_slice(&[0, 1, 0, 10, 0, 3, 0, 1, 0x02, 0xaa, 0, 0, 0, 7]); // client id
    want.extend_from_slice(&[0, 3, 0, 12, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0]); // empty IA_NA
    want.extend_from_slice(&[0, 8, 0, 2, 0, 0]); // elapsed time
    want.extend_from_slice(&[0, 6, 0, 4, 0, 23, 0, 82]); // ORO: DNS, SOL_MAX_RT
    assert_eq!(b, want);
}

#[test]
fn request_carries_server_id_and_the_offered_address() {
    let m = ClientMessage {
        message_type: MessageType::Request,
        server_id: Some(vec![0, 3, 0, 1, 1, 2, 3, 4, 5, 6]),
        address: Some(ADDR),
        elapsed_cs: 150,
        ..solicit()
    };
    let b = m.encode();
    assert_eq!(b[0], 3);
    assert!(b.windows(6).any(|w| w == [0, 2, 0, 10, 0, 3]), "server id");
    let mut iaaddr = vec![0, 5, 0, 24];
    iaaddr.extend_from_slice(&ADDR.octets());
    iaaddr.extend_from_slice(&[0; 8]);
    assert!(b.windows(iaaddr.len()).any(|w| w == iaaddr), "IA address");
    assert!(b.windows(6).any(|w| w == [0, 8, 0, 2, 0, 150]), "elapsed");
    // The IA_NA holds the IA address: 12 + 28 bytes.
    assert!(b.windows(4).any(|w| w == [0, 3, 0, 40]));
    assert!(b.ends_with(&[0, 6, 0, 2, 0, 23]), "ORO without SOL_MAX_RT");
}

#[test]
fn release_has_no_option_request() {
    let m = ClientMessage {
        message_type: MessageType::Release,
        server_id: Some(vec![1]),
        address: Some(ADDR),
        ..solicit()
    };
    let b = m.encode();
    assert_eq!(b[0], 8);
    let codes: Vec<u16> = options(&b[4..]).map(|o| o.unwrap().0).collect();
    assert_eq!(
        codes,
        vec![OPT_CLIENTID, OPT_SERVERID, OPT_IA_NA, OPT_ELAPSED_TIME]
    );
}

#[test]
fn reply_decodes_address_lifetimes_and_dns() {
    let dns = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0x53);
    let b = server_bytes(
        7,
        0xabcdef,
        Some(ia_bytes(1800, 2880, Some((ADDR, 3000, 3600)), None)),
        &[
            (OPT_DNS_SERVERS, dns.octets().to_vec()),
            (OPT_PREFERENCE, vec![255]),
        ],
    );
    let m = ServerMessage::decode(&b).unwrap();
    assert_eq!(m.message_type, MessageType::Reply);
    assert!(m.answers(&solicit()));
    assert_eq!(m.status_code(), status::SUCCESS);
    assert_eq!(m.preference, Some(255));
    assert_eq!(m.dns, vec![dns]);
    let ia = m.ia(iaid_of(&MAC)).unwrap();
    assert_eq!((ia.t1, ia.t2), (1800, 2880));
    let a = ia.granted().unwrap();
    assert_eq!((a.address, a.preferred, a.valid), (ADDR, 3000, 3600));
}

#[test]
fn no_addrs_avail_and_no_binding_grant_nothing() {
    let b = server_bytes(2, 0xabcdef, Some(ia_bytes(0, 0, None, Some(2))), &[]);
    let m = ServerMessage::decode(&b).unwrap();
    assert_eq!(m.message_type, MessageType::Advertise);
    let ia = m.ia(iaid_of(&MAC)).unwrap();
    assert_eq!(ia.status_code(), status::NO_ADDRS_AVAIL);
    assert!(ia.granted().is_none());
    let b = server_bytes(7, 0xabcdef, Some(ia_bytes(0, 0, None, Some(3))), &[]);
    let m = ServerMessage::decode(&b).unwrap();
    assert_eq!(
        m.ia(iaid_of(&MAC)).unwrap().status_code(),
        status::NO_BINDING
    );
    // A withdrawn address (valid lifetime 0) is not granted either.
    let b = server_bytes(
        7,
        0xabcdef,
        Some(ia_bytes(0, 0, Some((ADDR, 0, 0)), None)),
        &[],
    );
    let m = ServerMessage::decode(&b).unwrap();
    assert!(m.ia(iaid_of(&MAC)).unwrap().granted().is_none());
    // Message-level status (dnsmasq: NoAddrsAvail at top level).
    let b = server_bytes(
        2,
        0xabcdef,
        None,
        &[(OPT_STATUS_CODE, status_opt(2, "none"))],
    );
    let m = ServerMessage::decode(&b).unwrap();
    assert_eq!(m.status_code(), status::NO_ADDRS_AVAIL);
    assert_eq!(m.status.unwrap().message, "none");
}

#[test]
fn replies_to_others_do_not_answer() {
    let other = server_bytes(7, 0x000001, Some(ia_bytes(0, 0, None, None)), &[]);
    assert!(!ServerMessage::decode(&other).unwrap().answers(&solicit()));
    let mut b = vec![7, 0xab, 0xcd, 0xef];
    push_opt(&mut b, OPT_CLIENTID, &duid_ll(&[2, 0, 0, 0, 0, 9]));
    push_opt(&mut b, OPT_SERVERID, &[1]);
    assert!(!ServerMessage::decode(&b).unwrap().answers(&solicit()));
    let mut b = vec![7, 0xab, 0xcd, 0xef];
    push_opt(&mut b, OPT_CLIENTID, &duid_ll(&MAC));
    assert!(
        !ServerMessage::decode(&b).unwrap().answers(&solicit()),
        "no server id"
    );
}

#[test]
fn a_request_or_renewal_is_answered_only_by_the_server_it_names() {
    let ours = vec![0, 1, 0, 1, 9, 9, 9, 9, 2, 0, 0, 0, 0, 1];
    let renew = |server: Vec<u8>| ClientMessage {
        message_type: MessageType::Renew,
        server_id: Some(server),
        ..solicit()
    };
    let reply = ServerMessage::decode(&server_bytes(7, 0xabcdef, None, &[])).unwrap();
    assert!(reply.answers(&renew(ours)));
    assert!(
        !reply.answers(&renew(vec![0, 3, 0, 1, 2, 0, 0, 0, 0, 66])),
        "a reply from another server than the one we hold"
    );
}

#[test]
fn bad_datagrams_are_rejected() {
    assert_eq!(
        ServerMessage::decode(&[7, 0]),
        Err(DecodeError::TooShort(2))
    );
    assert_eq!(
        ServerMessage::decode(&solicit().encode()),
        Err(DecodeError::NotFromServer(1))
    );
    let mut b = server_bytes(7, 1, None, &[]);
    b.extend_from_slice(&[0, 3, 0, 40, 0, 0]);
    assert_eq!(
        ServerMessage::decode(&b),
        Err(DecodeError::Truncated(OPT_IA_NA))
    );
    let b = server_bytes(7, 1, Some(vec![0; 8]), &[]);
    assert_eq!(
        ServerMessage::decode(&b),
        Err(DecodeError::Truncated(OPT_IA_NA))
    );
    let mut ia = ia_bytes(0, 0, None, None);
    push_opt(&mut ia, OPT_IAADDR, &[0; 20]);
    let b = server_bytes(7, 1, Some(ia), &[]);
    assert_eq!(
        ServerMessage::decode(&b),
        Err(DecodeError::Truncated(OPT_IAADDR))
    );
    let mut b = server_bytes(7, 1, None, &[]);
    b.extend_from_slice(&[0, 1]);
    assert_eq!(ServerMessage::decode(&b), Err(DecodeError::Truncated(0)));
}
