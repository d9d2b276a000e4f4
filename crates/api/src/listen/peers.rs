//! Connections per client address: an IPv4 address, or an IPv6 /64 (what one host or one
//! customer usually holds; an IPv4 address mapped into IPv6 counts as that IPv4 address).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// What the per-address cap counts one connection against.
fn client_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

/// Open connections by client.
#[derive(Debug)]
pub(super) struct Peers {
    cap: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection of a client; counted until dropped.
#[derive(Debug)]
pub(super) struct Slot {
    peers: Arc<Peers>,
    client: IpAddr,
}

impl Peers {
    pub(super) fn new(cap: usize) -> Arc<Peers> {
        Arc::new(Peers {
            cap: cap.max(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for a new connection from `ip`, or None when its client holds the cap already.
    pub(super) fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let client = client_of(ip);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(client).or_default();
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(Slot {
            peers: self.clone(),
            client,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.peers.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.client) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_gets_at_most_the_cap() {
        let peers = Peers::new(2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let first = peers.admit(a).expect("1st");
        // The same address mapped into IPv6 is the same client.
        let second = peers
            .admit("::ffff:192.0.2.1".parse().unwrap())
            .expect("2nd");
        assert!(peers.admit(a).is_none(), "3rd of the same address");
        assert!(peers.admit(b).is_some(), "another address has its own cap");
        drop(first);
        let third = peers.admit(a).expect("a slot was freed");
        drop((second, third));
        assert!(peers.open.lock().unwrap().is_empty(), "nothing left behind");
    }

    #[test]
    fn an_ipv6_client_is_its_slash_64() {
        let peers = Peers::new(1);
        let _held = peers
            .admit("2001:db8:1:2::1".parse().unwrap())
            .expect("1st");
        assert!(
            peers
                .admit("2001:db8:1:2:ffff::9".parse().unwrap())
                .is_none()
        );
        assert!(peers.admit("2001:db8:1:3::1".parse().unwrap()).is_some());
    }
}
