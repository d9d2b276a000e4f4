//! The DHCPv4 client state machine of one interface, on its own OS thread inside the machine's
//! namespace: DISCOVER → OFFER → REQUEST → ACK, apply, then renew. Renewal is frequent
//! ([`Timing::renew_cap`]) so a port moved to another subnet (or to the parking network)
//! notices within seconds: an unanswered or refused renewal drops the address and starts over.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use super::apply::{self, Applied};
use super::netns;
use super::packet::{CLIENT_PORT, MessageType, Reply, Request, SERVER_PORT};
use super::worker::{Client, ClientInterface};

/// Retransmission and renewal timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Wait for a reply before the first retransmission.
    pub initial_wait: Duration,
    /// Longest wait between DISCOVERs (exponential backoff stops here).
    pub max_wait: Duration,
    /// Renew at half the lease, but at least this often.
    pub renew_cap: Duration,
    /// Unanswered renewals before the lease is considered lost.
    pub renew_attempts: u32,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            initial_wait: Duration::from_millis(500),
            max_wait: Duration::from_secs(2),
            renew_cap: Duration::from_secs(5),
            renew_attempts: 3,
        }
    }
}

/// Which interface the client runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Machine namespace.
    pub netns: String,
    /// Interface inside it.
    pub ifname: String,
    /// The interface's MAC (chaddr and client id).
    pub mac: [u8; 6],
    /// Option 12.
    pub hostname: Option<String>,
    /// Timing.
    pub timing: Timing,
}

/// What a client currently holds: `Status` (= `Status<Applied>`) for the DHCPv4 client,
/// [`Status6`](super::Status6) for the DHCPv6 one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Status<A = Applied> {
    /// Looking for a server.
    #[default]
    Searching,
    /// An address is applied.
    Bound(A),
    /// The thread ended (namespace or interface gone, or an error).
    Stopped(String),
}

/// State shared between a client handle and its thread (both families).
pub(crate) struct Shared<A> {
    pub(crate) stop: AtomicBool,
    pub(crate) flush_on_stop: AtomicBool,
    pub(crate) status: Mutex<Status<A>>,
}

impl<A: Clone> Shared<A> {
    pub(crate) fn new() -> Self {
        Shared {
            stop: AtomicBool::new(false),
            flush_on_stop: AtomicBool::new(false),
            status: Mutex::new(Status::Searching),
        }
    }
    pub(crate) fn set(&self, s: Status<A>) {
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }
    pub(crate) fn get(&self) -> Status<A> {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    /// Sleeps `d`, waking up for stop requests; false when stopped.
    pub(crate) fn sleep(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while Instant::now() < until {
            if self.stopping() {
                return false;
            }
            std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
        }
        !self.stopping()
    }
}

/// A running DHCPv4 client; dropping it stops the thread (leaving the address in place).
pub type DhcpClient = Client<ClientConfig, Applied>;

impl ClientInterface for ClientConfig {
    const HANDLE: &'static str = "DhcpClient";
    fn netns(&self) -> &str {
        &self.netns
    }
    fn ifname(&self) -> &str {
        &self.ifname
    }
}

/// How long one receive waits before the thread checks for a stop request.
pub(crate) const POLL: Duration = Duration::from_millis(200);

impl DhcpClient {
    /// Starts the client thread.
    pub fn start(config: ClientConfig) -> io::Result<DhcpClient> {
        Client::spawn(config, "dhcp", run)
    }
}

fn open_socket(ifname: &str) -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_broadcast(true)?;
    s.bind_device(Some(ifname.as_bytes()))?;
    s.bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, CLIENT_PORT).into())?;
    s.set_read_timeout(Some(POLL))?;
    Ok(s)
}

/// The thread body: set up, then DISCOVER/REQUEST/renew until stopped.
fn run(cfg: &ClientConfig, shared: &Shared<Applied>) -> io::Result<()> {
    // Replies come from the gateway before we have a route back to it.
    let _ = netns::write_sysctl("net.ipv4.conf.all.rp_filter", "0");
    let _ = netns::write_sysctl(&format!("net.ipv4.conf.{}.rp_filter", cfg.ifname), "0");
    let socket = loop {
        match open_socket(&cfg.ifname) {
            Ok(s) => break s,
            // The fabric may not have created the interface yet.
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {
                if shared.stopping() {
                    return Ok(());
                }
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(e),
        }
    };
    let mut machine = Machine {
        cfg,
        shared,
        socket,
        applied: None,
        xid: random_xid(&cfg.mac),
        server: None,
    };
    let result = machine.run();
    if shared.flush_on_stop.load(Ordering::Relaxed)
        && let Some(a) = machine.applied.take()
    {
        apply::remove(&cfg.netns, &cfg.ifname, &a);
    }
    result
}

/// A fresh random transaction id for every exchange (the kernel's `getrandom`): a neighbour
/// who sees one of our broadcasts cannot tell the next one. Should the kernel refuse (it does
/// not once booted), the MAC's low bytes mixed with the clock.
pub(crate) fn random_xid(mac: &[u8; 6]) -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: the buffer is valid for writes of its length.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if usize::try_from(n).ok() == Some(b.len()) {
        return u32::from_ne_bytes(b);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]) ^ nanos
}

struct Machine<'a> {
    cfg: &'a ClientConfig,
    shared: &'a Shared<Applied>,
    socket: Socket,
    applied: Option<Applied>,
    xid: u32,
    /// The server whose OFFER we took (its server identifier): from then on only its replies
    /// count, until the lease is lost and discovery starts over.
    server: Option<Ipv4Addr>,
}

type Outcome = super::worker::Outcome<Reply>;

impl Machine<'_> {
    fn run(&mut self) -> io::Result<()> {
        while !self.shared.stopping() {
            self.server = None;
            let Some(offer) = self.discover()? else {
                return Ok(());
            };
            self.server = offer.server_id;
            let req = self.request(MessageType::Request, Ipv4Addr::UNSPECIFIED, &offer);
            match self.exchange(&req, self.cfg.timing.max_wait)? {
                Outcome::Reply(ack) if ack.message_type == MessageType::Ack => {
                    if !self.bind(&ack) {
                        continue;
                    }
                    if !self.stay_bound(*ack)? {
                        return Ok(());
                    }
                }
                Outcome::Stopped => return Ok(()),
                _ => {}
            }
        }
        Ok(())
    }

    fn request(&mut self, kind: MessageType, ciaddr: Ipv4Addr, offer: &Reply) -> Request {
        self.xid = random_xid(&self.cfg.mac);
        let selecting = ciaddr.is_unspecified() && kind == MessageType::Request;
        Request {
            message_type: kind,
            xid: self.xid,
            secs: 0,
            chaddr: self.cfg.mac,
            ciaddr,
            requested_ip: selecting.then_some(offer.yiaddr),
            server_id: if selecting { offer.server_id } else { None },
            hostname: self.cfg.hostname.clone(),
        }
    }

    /// DISCOVERs with backoff until an OFFER arrives (None when stopped).
    fn discover(&mut self) -> io::Result<Option<Reply>> {
        let mut wait = self.cfg.timing.initial_wait;
        loop {
            self.xid = random_xid(&self.cfg.mac);
            let req = Request {
                message_type: MessageType::Discover,
                xid: self.xid,
                secs: 0,
                chaddr: self.cfg.mac,
                ciaddr: Ipv4Addr::UNSPECIFIED,
                requested_ip: None,
                server_id: None,
                hostname: self.cfg.hostname.clone(),
            };
            match self.exchange(&req, wait)? {
                Outcome::Reply(r) if r.message_type == MessageType::Offer => return Ok(Some(*r)),
                Outcome::Stopped => return Ok(None),
                _ => wait = (wait * 2).min(self.cfg.timing.max_wait),
            }
        }
    }

    /// Applies an ACK; false when it could not be applied (start over).
    fn bind(&mut self, ack: &Reply) -> bool {
        match apply::apply(
            &self.cfg.netns,
            &self.cfg.ifname,
            ack,
            self.applied.as_ref(),
        ) {
            Ok(a) => {
                self.applied = Some(a.clone());
                self.shared.set(Status::Bound(a));
                true
            }
            Err(e) => {
                tracing::warn!(netns = %self.cfg.netns, ifname = %self.cfg.ifname, error = %e, "cannot apply DHCP lease");
                self.drop_lease();
                std::thread::sleep(self.cfg.timing.max_wait);
                false
            }
        }
    }

    fn drop_lease(&mut self) {
        if let Some(a) = self.applied.take() {
            apply::remove(&self.cfg.netns, &self.cfg.ifname, &a);
        }
        self.shared.set(Status::Searching);
    }

    /// Renews until the lease is lost (Ok(true): start over) or the client stops (Ok(false)).
    fn stay_bound(&mut self, mut lease: Reply) -> io::Result<bool> {
        loop {
            let half = Duration::from_secs(u64::from(lease.lease_seconds.unwrap_or(3600) / 2));
            let renew_in = lease
                .renewal_seconds
                .map(|s| Duration::from_secs(u64::from(s)))
                .unwrap_or(half)
                .min(self.cfg.timing.renew_cap)
                .max(Duration::from_millis(200));
            if !self.sleep(renew_in) {
                return Ok(false);
            }
            let mut renewed = None;
            for _ in 0..self.cfg.timing.renew_attempts.max(1) {
                let req = self.request(MessageType::Request, lease.yiaddr, &lease);
                match self.exchange(&req, self.cfg.timing.max_wait.min(Duration::from_secs(1)))? {
                    Outcome::Reply(r) => {
                        renewed = Some(*r);
                        break;
                    }
                    Outcome::Stopped => return Ok(false),
                    Outcome::Timeout => {}
                }
            }
            match renewed {
                Some(ack) if ack.message_type == MessageType::Ack && ack.yiaddr == lease.yiaddr => {
                    if !self.bind(&ack) {
                        return Ok(true);
                    }
                    lease = ack;
                }
                _ => {
                    // Refused, unanswered (moved to another network) or a different address.
                    self.drop_lease();
                    return Ok(true);
                }
            }
        }
    }

    fn sleep(&self, d: Duration) -> bool {
        self.shared.sleep(d)
    }

    /// Broadcasts `req` and waits up to `wait` for a reply answering it ([`answers`]).
    fn exchange(&self, req: &Request, wait: Duration) -> io::Result<Outcome> {
        let to = SocketAddrV4::new(Ipv4Addr::BROADCAST, SERVER_PORT);
        if let Err(e) = self.socket.send_to(&req.encode(), &to.into()) {
            // ENETDOWN / ENETUNREACH while the link is not up yet: treat as unanswered.
            if matches!(
                e.raw_os_error(),
                Some(libc::ENETDOWN | libc::ENETUNREACH | libc::ENXIO)
            ) {
                return Ok(Outcome::unanswered(self.shared, wait));
            }
            return Err(e);
        }
        Outcome::receive(&self.socket, self.shared, wait, 1500, |bytes| {
            Reply::decode(bytes)
                .ok()
                .filter(|r| answers(r, req, self.server))
        })
    }
}

/// Whether `r` answers `req`: same transaction and client, and sent by a server that names
/// itself (option 54) — once an OFFER was taken, by that `server` only. A reply from any other
/// server (a rogue on the link) is ignored, whatever it offers.
fn answers(r: &Reply, req: &Request, server: Option<Ipv4Addr>) -> bool {
    r.xid == req.xid
        && r.chaddr == req.chaddr
        && r.server_id.is_some()
        && (server.is_none() || r.server_id == server)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(xid: u32, server: Option<Ipv4Addr>) -> Reply {
        Reply {
            message_type: MessageType::Ack,
            xid,
            chaddr: [2, 0, 0, 0, 0, 1],
            yiaddr: Ipv4Addr::new(10, 0, 1, 2),
            server_id: server,
            prefix_len: None,
            routers: vec![],
            dns: vec![],
            mtu: None,
            lease_seconds: None,
            renewal_seconds: None,
            rebinding_seconds: None,
            classless_routes: vec![],
        }
    }

    #[test]
    fn only_the_server_whose_offer_was_taken_is_heard() {
        let req = Request {
            message_type: MessageType::Request,
            xid: 7,
            secs: 0,
            chaddr: [2, 0, 0, 0, 0, 1],
            ciaddr: Ipv4Addr::UNSPECIFIED,
            requested_ip: None,
            server_id: None,
            hostname: None,
        };
        let (gw, rogue) = (Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 1, 66));
        assert!(
            answers(&reply(7, Some(gw)), &req, None),
            "discovery: any named server"
        );
        assert!(
            !answers(&reply(7, None), &req, None),
            "a server names itself"
        );
        assert!(answers(&reply(7, Some(gw)), &req, Some(gw)));
        assert!(
            !answers(&reply(7, Some(rogue)), &req, Some(gw)),
            "another server"
        );
        assert!(
            !answers(&reply(8, Some(gw)), &req, Some(gw)),
            "another transaction"
        );
    }

    #[test]
    fn transaction_ids_are_random() {
        let mac = [2, 0, 0, 0, 0, 1];
        let ids: std::collections::BTreeSet<u32> = (0..64).map(|_| random_xid(&mac)).collect();
        assert!(ids.len() > 60, "{ids:?}");
        let mut sorted: Vec<u32> = ids.into_iter().collect();
        sorted.sort_unstable();
        assert!(
            sorted.windows(2).filter(|w| w[1] - w[0] == 1).count() < 2,
            "not sequential"
        );
    }
}
