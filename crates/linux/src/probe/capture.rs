//! Capturing what arrives on an interface of a namespace (an `AF_PACKET` socket read by a
//! background thread inside it), and interface helpers for forged traffic: index, scoped IPv6
//! socket addresses, MAC and link-local address, and UDP sent from a chosen source.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::dhcp::netns;

/// How often the capture thread checks whether it should stop.
const RECV_TIMEOUT: Duration = Duration::from_millis(100);
/// `sll_pkttype` of a frame this host sent (not in the libc crate).
const PACKET_OUTGOING: u8 = 4;

type Frames = Arc<Mutex<Vec<Vec<u8>>>>;

/// Frames received on one interface of a namespace, collected by a background thread until
/// the capture is stopped or dropped.
pub struct Capture {
    frames: Frames,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Capture {
    /// Starts capturing the frames arriving on `ifname` in `ns` (frames it sends are
    /// skipped). Returns once the socket is bound: anything arriving later is seen.
    pub fn start(ns: &str, ifname: &str) -> io::Result<Capture> {
        Self::open(ns, ifname, false)
    }

    /// Like [`Capture::start`], also keeping the frames `ifname` sends.
    pub fn start_both_ways(ns: &str, ifname: &str) -> io::Result<Capture> {
        Self::open(ns, ifname, true)
    }

    fn open(ns: &str, ifname: &str, outgoing: bool) -> io::Result<Capture> {
        let frames: Frames = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let (f2, s2, name) = (frames.clone(), stop.clone(), ifname.to_string());
        let thread = netns::spawn_in(ns, format!("capture-{ifname}"), move || {
            let fd = match packet_socket(&name) {
                Ok(fd) => {
                    let _ = ready_tx.send(Ok(()));
                    fd
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                    return Err(e);
                }
            };
            let mut buf = vec![0u8; 65_536];
            while !s2.load(Ordering::Relaxed) {
                if let Some((n, pkttype)) = receive(&fd, &mut buf)?
                    && (outgoing || pkttype != PACKET_OUTGOING)
                {
                    f2.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(buf[..n].to_vec());
                }
            }
            Ok(())
        })?;
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(io::Error::new(
                    e.kind(),
                    format!("capture on {ns}/{ifname}: {e}"),
                ));
            }
            Err(_) => return Err(io::Error::other("capture thread did not start")),
        }
        Ok(Capture {
            frames,
            stop,
            thread: Some(thread),
        })
    }

    /// The frames captured so far, in arrival order.
    pub fn frames(&self) -> Vec<Vec<u8>> {
        self.frames
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The captured frames containing `marker` anywhere.
    pub fn frames_with(&self, marker: &[u8]) -> Vec<Vec<u8>> {
        self.frames
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|f| contains(f, marker))
            .cloned()
            .collect()
    }

    /// Whether a captured frame contains `marker` anywhere. An ICMP error quoting a packet
    /// contains its marker too: use [`Capture::frames_with`] and
    /// [`dissect`](super::dissect::dissect) when that matters.
    pub fn contains(&self, marker: &[u8]) -> bool {
        self.frames
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|f| contains(f, marker))
    }

    /// Waits up to `wait` for a frame containing `marker`.
    pub fn wait_for(&self, marker: &[u8], wait: Duration) -> bool {
        let until = Instant::now() + wait;
        loop {
            if self.contains(marker) {
                return true;
            }
            if Instant::now() > until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Forgets the frames captured so far.
    pub fn clear(&self) {
        self.frames
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Stops capturing and returns the frames, or the error that ended the capture early.
    pub fn stop(mut self) -> io::Result<Vec<Vec<u8>>> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join()
                .map_err(|_| io::Error::other("capture thread panicked"))??;
        }
        Ok(self.frames())
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether `haystack` contains `needle` (an empty needle is contained everywhere).
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// An `AF_PACKET` raw socket receiving every protocol on `ifname` of the calling thread's
/// namespace, with a receive timeout of [`RECV_TIMEOUT`].
fn packet_socket(ifname: &str) -> io::Result<OwnedFd> {
    let index = ifindex_here(ifname)?;
    // SAFETY: plain libc calls; the descriptor is owned by an OwnedFd as soon as it exists,
    // and the sockaddr and timeval are fully initialised before use.
    unsafe {
        // Protocol 0 receives nothing until bound: no frames of other interfaces slip in.
        let raw = libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0);
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = OwnedFd::from_raw_fd(raw);
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: libc::suseconds_t::try_from(RECV_TIMEOUT.as_micros()).unwrap_or(100_000),
        };
        let rc = libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            std::ptr::addr_of!(tv).cast(),
            socklen::<libc::timeval>(),
        );
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut addr: libc::sockaddr_ll = std::mem::zeroed();
        addr.sll_family = u16::try_from(libc::AF_PACKET).unwrap_or(17);
        addr.sll_protocol = u16::try_from(libc::ETH_P_ALL).unwrap_or(3).to_be();
        addr.sll_ifindex = i32::try_from(index).unwrap_or(0);
        let rc = libc::bind(
            fd.as_raw_fd(),
            std::ptr::addr_of!(addr).cast(),
            socklen::<libc::sockaddr_ll>(),
        );
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }
}

fn socklen<T>() -> libc::socklen_t {
    libc::socklen_t::try_from(std::mem::size_of::<T>()).unwrap_or(0)
}

/// One frame into `buf`: its length and packet type, `None` on timeout or interruption.
fn receive(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<(usize, u8)>> {
    // SAFETY: recvfrom writes at most buf.len() bytes into buf and at most `len` bytes into
    // the zeroed sockaddr_ll, both of which outlive the call.
    let (n, addr, e) = unsafe {
        let mut addr: libc::sockaddr_ll = std::mem::zeroed();
        let mut len = socklen::<libc::sockaddr_ll>();
        let n = libc::recvfrom(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            std::ptr::addr_of_mut!(addr).cast(),
            &raw mut len,
        );
        (n, addr, io::Error::last_os_error())
    };
    match usize::try_from(n) {
        Ok(n) => Ok(Some((n, addr.sll_pkttype))),
        Err(_) => match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted => {
                Ok(None)
            }
            _ => Err(e),
        },
    }
}

/// The index of interface `ifname` in the calling thread's namespace.
pub fn ifindex_here(ifname: &str) -> io::Result<u32> {
    let name = std::ffi::CString::new(ifname)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: if_nametoindex only reads the NUL-terminated name, alive for the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("interface {ifname}: {e}")));
    }
    Ok(index)
}

/// The index of interface `ifname` in namespace `ns`.
pub fn ifindex(ns: &str, ifname: &str) -> io::Result<u32> {
    let name = ifname.to_string();
    netns::run_in(ns, move || ifindex_here(&name))
}

/// `[ip%ifname]:port` for `ifname` in `ns`: the socket address a link-local or link-scope
/// multicast IPv6 address needs (scope id = interface index).
pub fn scoped(ns: &str, ifname: &str, ip: Ipv6Addr, port: u16) -> io::Result<SocketAddr> {
    Ok(SocketAddrV6::new(ip, port, 0, ifindex(ns, ifname)?).into())
}

/// Sends one UDP datagram from `ns`, from the socket bound to `bind` (e.g. a scoped
/// link-local `[fe80::x%if]:547`, or a server port), to `to`. The socket is freebind and
/// transparent (best effort), so `bind` may also be an address `ns` does not own. An IPv6
/// `to` without scope id takes `bind`'s (link-local and multicast destinations need one).
pub fn send_udp_from(ns: &str, bind: SocketAddr, to: SocketAddr, payload: &[u8]) -> io::Result<()> {
    let payload = payload.to_vec();
    let to = match (bind, to) {
        (SocketAddr::V6(b), SocketAddr::V6(mut t)) if t.scope_id() == 0 => {
            t.set_scope_id(b.scope_id());
            SocketAddr::V6(t)
        }
        _ => to,
    };
    netns::run_in(ns, move || {
        let domain = socket2::Domain::for_address(bind);
        let s = socket2::Socket::new(domain, socket2::Type::DGRAM, None)?;
        s.set_reuse_address(true)?;
        if bind.is_ipv4() {
            s.set_broadcast(true)?;
            s.set_freebind_v4(true).ok();
            s.set_ip_transparent_v4(true).ok();
        } else {
            s.set_only_v6(true)?;
            s.set_freebind_v6(true).ok();
            s.set_ip_transparent_v6(true).ok();
        }
        s.bind(&bind.into())?;
        let u: UdpSocket = s.into();
        u.send_to(&payload, to)?;
        Ok(())
    })
}

/// The octets of an interface MAC (`aa:bb:cc:dd:ee:ff`, surrounding white space ignored), read
/// by the one MAC rule (see [`crate::dhcp::packet::parse_mac`]).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    crate::dhcp::packet::parse_mac(s.trim())
}

/// The MAC address of `ifname` in `ns`.
pub fn mac_of(ns: &str, ifname: &str) -> io::Result<[u8; 6]> {
    let out = Command::new("ip")
        .args(["-n", ns, "-o", "link", "show", "dev", ifname])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    words
        .find(|w| *w == "link/ether")
        .and_then(|_| words.next())
        .and_then(parse_mac)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no MAC on {ns}/{ifname}")))
}

/// The (first) IPv6 link-local address of `ifname` in `ns`, once usable (not tentative).
pub fn link_local_of(ns: &str, ifname: &str) -> Option<Ipv6Addr> {
    let out = Command::new("ip")
        .args([
            "-n", ns, "-6", "-o", "addr", "show", "dev", ifname, "scope", "link",
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // A tentative address (duplicate address detection still running) cannot be used yet.
    if text.contains("tentative") {
        return None;
    }
    let mut words = text.split_whitespace();
    words.find(|w| *w == "inet6")?;
    let addr = words.next()?.split('/').next()?;
    match addr.parse().ok()? {
        IpAddr::V6(a) => Some(a),
        IpAddr::V4(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_found_anywhere() {
        assert!(contains(b"..MARK..", b"MARK"));
        assert!(contains(b"MARK", b"MARK"));
        assert!(!contains(b"MAR", b"MARK"));
        assert!(!contains(b"M.A.R.K", b"MARK"));
        assert!(contains(b"", b""));
    }

    #[test]
    fn macs_parse() {
        assert_eq!(parse_mac("02:00:0a:FF:00:01"), Some([2, 0, 10, 255, 0, 1]));
        assert_eq!(
            parse_mac(" 02:00:0a:ff:00:01\n"),
            Some([2, 0, 10, 255, 0, 1])
        );
        assert_eq!(parse_mac("02:00:0a:ff:00"), None);
        assert_eq!(parse_mac("02:00:0a:ff:00:01:02"), None);
        assert_eq!(parse_mac("02:00:0a:ff:00:zz"), None);
    }
}
