//! The DHCPv6 client of one interface (stateful, one IA_NA), on its own OS thread inside the
//! machine's namespace: Solicit → Advertise → Request → Reply, apply the address, then Renew
//! at T1 — capped by [`Timing::renew_cap`] like the DHCPv4 client, so a port moved to
//! another subnet notices within seconds: an unanswered or refused renewal drops the address
//! and starts over. The UDP socket is bound to the interface's link-local address, port 546,
//! on the device; messages go to `ff02::1:2` port 547. Routes and MTU come from RAs.

use std::io;
use std::net::{Ipv6Addr, SocketAddrV6};
use std::sync::atomic::Ordering;

use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use super::apply6::{self, Applied6};
use super::client::{POLL, Shared, Status, Timing};
use super::packet6::{
    ALL_SERVERS, CLIENT_PORT, ClientMessage, MessageType, SERVER_PORT, ServerMessage, duid_ll,
    iaid_of, status,
};
use super::ra;
use super::worker::{Client, ClientInterface};

/// What the DHCPv6 client of an interface holds.
pub type Status6 = Status<Applied6>;

/// Which interface the DHCPv6 client runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client6Config {
    /// Machine namespace.
    pub netns: String,
    /// Interface inside it.
    pub ifname: String,
    /// The interface's MAC (the DUID-LL and the IAID are built from it).
    pub mac: [u8; 6],
    /// Timing (shared with the DHCPv4 client).
    pub timing: Timing,
}

/// Consecutive unanswered renewal rounds (each of `renew_attempts` tries) after which the
/// address counts as lost (the port was moved off the network or the server is gone).
const SILENT_ROUNDS_BEFORE_LOSS: u32 = 3;

/// A running DHCPv6 client; dropping it stops the thread (leaving the address in place, to
/// expire with its valid lifetime).
pub type Dhcp6Client = Client<Client6Config, Applied6>;

impl ClientInterface for Client6Config {
    const HANDLE: &'static str = "Dhcp6Client";
    fn netns(&self) -> &str {
        &self.netns
    }
    fn ifname(&self) -> &str {
        &self.ifname
    }
}

impl Dhcp6Client {
    /// Starts the client thread.
    pub fn start(config: Client6Config) -> io::Result<Dhcp6Client> {
        Client::spawn(config, "dhcp6", run)
    }
}

/// IFA_F_DADFAILED and IFA_F_TENTATIVE: a link-local address that cannot be bound yet.
const UNUSABLE_FLAGS: u32 = 0x08 | 0x40;
/// RT_SCOPE_LINK as `if_inet6` prints it.
const SCOPE_LINK: u32 = 0x20;

/// The usable link-local address and index of `ifname` in the calling thread's namespace
/// (`/proc/thread-self`: `/proc/net` would show the process's namespace, not the thread's).
pub fn link_local(ifname: &str) -> io::Result<Option<(Ipv6Addr, u32)>> {
    let text = std::fs::read_to_string("/proc/thread-self/net/if_inet6")?;
    Ok(parse_if_inet6(&text, ifname))
}

/// Finds the usable link-local address of `ifname` in `/proc/net/if_inet6` text.
pub fn parse_if_inet6(text: &str, ifname: &str) -> Option<(Ipv6Addr, u32)> {
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 6 || f[5] != ifname {
            return None;
        }
        let hex = |s: &str| u32::from_str_radix(s, 16).ok();
        let (index, scope, flags) = (hex(f[1])?, hex(f[3])?, hex(f[4])?);
        if scope != SCOPE_LINK || flags & UNUSABLE_FLAGS != 0 {
            return None;
        }
        let bits = u128::from_str_radix(f[0], 16).ok()?;
        Some((Ipv6Addr::from(bits), index))
    })
}

fn open_socket(ifname: &str, ll: Ipv6Addr, index: u32) -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_only_v6(true)?;
    s.set_reuse_address(true)?;
    s.bind_device(Some(ifname.as_bytes()))?;
    s.bind(&SocketAddrV6::new(ll, CLIENT_PORT, 0, index).into())?;
    s.set_multicast_if_v6(index)?;
    s.set_read_timeout(Some(POLL))?;
    Ok(s)
}

/// The thread body: wait for a link-local address, then Solicit/Request/Renew until stopped.
fn run(cfg: &Client6Config, shared: &Shared<Applied6>) -> io::Result<()> {
    let (socket, index) = loop {
        if shared.stopping() {
            return Ok(());
        }
        // The fabric may not have created the interface yet, or DAD is still running.
        if let Some((ll, index)) = link_local(&cfg.ifname)? {
            match open_socket(&cfg.ifname, ll, index) {
                Ok(s) => break (s, index),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EADDRNOTAVAIL | libc::ENODEV)) => {}
                Err(e) => return Err(e),
            }
        }
        std::thread::sleep(POLL);
    };
    let mut machine = Machine6 {
        cfg,
        shared,
        socket,
        index,
        duid: duid_ll(&cfg.mac),
        iaid: iaid_of(&cfg.mac),
        applied: None,
        xid: random_xid(&cfg.mac),
    };
    let result = machine.run();
    if shared.flush_on_stop.load(Ordering::Relaxed)
        && let Some(a) = machine.applied.take()
    {
        apply6::remove(&cfg.netns, &cfg.ifname, &a);
    }
    result
}

/// A DHCPv6 transaction id is 24 bits: a random DHCPv4 one, cut to size.
fn random_xid(mac: &[u8; 6]) -> u32 {
    super::client::random_xid(mac) & 0x00ff_ffff
}

struct Machine6<'a> {
    cfg: &'a Client6Config,
    shared: &'a Shared<Applied6>,
    socket: Socket,
    index: u32,
    duid: Vec<u8>,
    iaid: u32,
    applied: Option<Applied6>,
    xid: u32,
}

type Outcome = super::worker::Outcome<ServerMessage>;

/// Hundredths of a second since `start`, as the Elapsed Time option carries them.
fn elapsed_cs(start: Instant) -> u16 {
    u16::try_from(start.elapsed().as_millis() / 10).unwrap_or(u16::MAX)
}

impl Machine6<'_> {
    fn run(&mut self) -> io::Result<()> {
        while !self.shared.stopping() {
            let Some(adv) = self.solicit()? else {
                return Ok(());
            };
            match self.request(&adv)? {
                Outcome::Reply(reply) if self.bind(&reply) => {
                    if !self.stay_bound()? {
                        return Ok(());
                    }
                }
                Outcome::Stopped => return Ok(()),
                _ => {
                    if !self.shared.sleep(self.cfg.timing.max_wait) {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    fn message(&mut self, kind: MessageType, start: Instant) -> ClientMessage {
        ClientMessage {
            message_type: kind,
            xid: self.xid,
            client_id: self.duid.clone(),
            server_id: None,
            iaid: self.iaid,
            address: None,
            elapsed_cs: elapsed_cs(start),
        }
    }

    fn next_xid(&mut self) {
        self.xid = random_xid(&self.cfg.mac);
    }

    /// The address `m` grants our IA (success status, valid lifetime > 0).
    fn grant<'m>(&self, m: &'m ServerMessage) -> Option<&'m super::packet6::IaAddress> {
        if m.status_code() != status::SUCCESS {
            return None;
        }
        m.ia(self.iaid)?.granted()
    }

    /// Solicits with backoff until an Advertise with an address arrives (None when stopped).
    fn solicit(&mut self) -> io::Result<Option<ServerMessage>> {
        let start = Instant::now();
        self.next_xid();
        let mut wait = self.cfg.timing.initial_wait;
        loop {
            let msg = self.message(MessageType::Solicit, start);
            match self.exchange(&msg, wait)? {
                Outcome::Reply(m) if self.grant(&m).is_some() => return Ok(Some(*m)),
                Outcome::Stopped => return Ok(None),
                // No answer, or no address for us (yet): try again later.
                _ => wait = (wait * 2).min(self.cfg.timing.max_wait),
            }
        }
    }

    /// Requests the advertised address from the advertising server.
    fn request(&mut self, adv: &ServerMessage) -> io::Result<Outcome> {
        let start = Instant::now();
        self.next_xid();
        let address = self.grant(adv).map(|a| a.address);
        for _ in 0..self.cfg.timing.renew_attempts.max(1) {
            let msg = ClientMessage {
                server_id: adv.server_id.clone(),
                address,
                ..self.message(MessageType::Request, start)
            };
            match self.exchange(&msg, self.cfg.timing.max_wait)? {
                Outcome::Timeout => {}
                other => return Ok(other),
            }
        }
        Ok(Outcome::Timeout)
    }

    /// Applies the address of a Reply; false when there is none or it cannot be applied.
    fn bind(&mut self, reply: &ServerMessage) -> bool {
        let Some(a) = self.grant(reply) else {
            return false;
        };
        let next = Applied6 {
            address: a.address,
            prefix_len: 128,
            preferred: a.preferred,
            valid: a.valid,
            dns: reply.dns.clone(),
            server_id: reply.server_id.clone().unwrap_or_default(),
        };
        match apply6::apply(
            &self.cfg.netns,
            &self.cfg.ifname,
            &next,
            self.applied.as_ref(),
        ) {
            Ok(()) => {
                if self.applied.is_none() {
                    // A fresh address (maybe on another network): ask for the RA now.
                    let _ = ra::solicit_router(&self.cfg.ifname);
                }
                self.applied = Some(next.clone());
                self.shared.set(Status::Bound(next));
                true
            }
            Err(e) => {
                tracing::warn!(netns = %self.cfg.netns, ifname = %self.cfg.ifname, error = %e, "cannot apply DHCPv6 address");
                self.drop_address();
                false
            }
        }
    }

    /// Gives up the address (refused, unanswered: the port may have moved), and the default
    /// route learnt from the old network's RAs with it.
    fn drop_address(&mut self) {
        if let Some(a) = self.applied.take() {
            apply6::remove(&self.cfg.netns, &self.cfg.ifname, &a);
            ra::forget_default_router(&self.cfg.netns, &self.cfg.ifname);
            let _ = ra::solicit_router(&self.cfg.ifname);
        }
        self.shared.set(Status::Searching);
    }

    /// When to renew: T1 (half the preferred lifetime when the server leaves it to us),
    /// capped by the timing.
    fn renew_in(&self, t1: u32) -> Duration {
        let preferred = self.applied.as_ref().map_or(3600, |a| a.preferred);
        let t1 = if t1 == 0 || t1 == u32::MAX {
            preferred / 2
        } else {
            t1
        };
        Duration::from_secs(u64::from(t1))
            .min(self.cfg.timing.renew_cap)
            .max(Duration::from_millis(200))
    }

    /// Renews until the address is lost (Ok(true): start over) or the client stops (Ok(false)).
    fn stay_bound(&mut self) -> io::Result<bool> {
        let mut t1 = 0;
        let mut silent_rounds = 0;
        loop {
            if !self.shared.sleep(self.renew_in(t1)) {
                return Ok(false);
            }
            let Some(held) = self.applied.clone() else {
                return Ok(true);
            };
            let start = Instant::now();
            self.next_xid();
            let mut renewed = None;
            for _ in 0..self.cfg.timing.renew_attempts.max(1) {
                let msg = ClientMessage {
                    server_id: Some(held.server_id.clone()),
                    address: Some(held.address),
                    ..self.message(MessageType::Renew, start)
                };
                let wait = self.cfg.timing.max_wait.min(Duration::from_secs(1));
                match self.exchange(&msg, wait)? {
                    Outcome::Reply(r) => {
                        renewed = Some(*r);
                        break;
                    }
                    Outcome::Stopped => return Ok(false),
                    Outcome::Timeout => {}
                }
            }
            let same = renewed
                .as_ref()
                .and_then(|r| self.grant(r))
                .is_some_and(|a| a.address == held.address);
            match renewed {
                Some(r) if same => {
                    if !self.bind(&r) {
                        return Ok(true);
                    }
                    silent_rounds = 0;
                    t1 = r.ia(self.iaid).map_or(0, |ia| ia.t1);
                }
                // Unanswered: a busy server or a lost packet must not cost the address and the
                // default route; only repeated silence means the port left the network.
                None if silent_rounds + 1 < SILENT_ROUNDS_BEFORE_LOSS => silent_rounds += 1,
                _ => {
                    // NoBinding (moved to another network), another address, or long silence.
                    self.drop_address();
                    return Ok(true);
                }
            }
        }
    }

    /// Multicasts `msg` to the servers and waits up to `wait` for a message answering it
    /// (an Advertise for a Solicit, a Reply otherwise).
    fn exchange(&self, msg: &ClientMessage, wait: Duration) -> io::Result<Outcome> {
        let to = SocketAddrV6::new(ALL_SERVERS, SERVER_PORT, 0, self.index);
        if let Err(e) = self.socket.send_to(&msg.encode(), &to.into()) {
            // The link went down: treat as unanswered; anything else ends the thread.
            if matches!(
                e.raw_os_error(),
                Some(libc::ENETDOWN | libc::ENETUNREACH | libc::ENXIO | libc::EADDRNOTAVAIL)
            ) {
                return Ok(Outcome::unanswered(self.shared, wait));
            }
            return Err(e);
        }
        let expected = if msg.message_type == MessageType::Solicit {
            MessageType::Advertise
        } else {
            MessageType::Reply
        };
        Outcome::receive(&self.socket, self.shared, wait, 2048, |bytes| {
            ServerMessage::decode(bytes)
                .ok()
                .filter(|m| m.message_type == expected && m.answers(msg))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_inet6_finds_the_usable_link_local() {
        let text = "\
fd000001000000000000000000000023 02 80 00 80   eth0
fe8000000000000000aa00fffe000007 02 40 20 80   eth0
fe8000000000000000aa00fffe000008 03 40 20 c0   eth1
00000000000000000000000000000001 01 80 10 80       lo
";
        assert_eq!(
            parse_if_inet6(text, "eth0"),
            Some(("fe80::aa:ff:fe00:7".parse().unwrap(), 2))
        );
        assert_eq!(parse_if_inet6(text, "eth1"), None, "tentative (0x40)");
        assert_eq!(parse_if_inet6(text, "lo"), None, "not link scope");
        assert_eq!(parse_if_inet6(text, "eth9"), None);
    }
}
