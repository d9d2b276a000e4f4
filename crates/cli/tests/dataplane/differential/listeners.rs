//! Who answers: in every workload namespace (and for the internet client in the external
//! namespace) one thread serves TCP and UDP on [`PORTS`], answering each connection or
//! datagram with its own label, so a probe knows WHICH namespace it reached (with overlapping
//! CIDRs the same address exists in several networks). The probes: a TCP connect that reads
//! the label, a UDP datagram whose echo is the label, and one ping.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use osac_linux::dhcp::netns;

use super::topology::PORTS;

/// A namespace's answering thread; stops when dropped.
pub struct Responder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Responder {
    /// Serves `label` on `bind`:[`PORTS`] (TCP and UDP) inside `ns`.
    pub fn start(ns: &str, bind: IpAddr, label: &str) -> io::Result<Responder> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
        let (stop2, label) = (stop.clone(), label.as_bytes().to_vec());
        let thread = netns::spawn_in(ns, format!("responder-{ns}"), move || {
            let sockets = bind_all(bind);
            let (tcp, udp) = match sockets {
                Ok(s) => {
                    let _ = ready_tx.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                    return Err(e);
                }
            };
            serve(&tcp, &udp, &label, &stop2);
            Ok(())
        })?;
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(Responder {
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => Err(io::Error::new(e.kind(), format!("responder in {ns}: {e}"))),
            Err(_) => Err(io::Error::other(format!("responder in {ns} did not start"))),
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn bind_all(ip: IpAddr) -> io::Result<(Vec<TcpListener>, Vec<UdpSocket>)> {
    let (mut tcp, mut udp) = (Vec::new(), Vec::new());
    for port in PORTS {
        let addr = SocketAddr::new(ip, port);
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        s.set_reuse_address(true)?;
        s.bind(&addr.into())?;
        s.listen(128)?;
        let l: TcpListener = s.into();
        l.set_nonblocking(true)?;
        tcp.push(l);
        let u = UdpSocket::bind(addr)?;
        u.set_nonblocking(true)?;
        udp.push(u);
    }
    Ok((tcp, udp))
}

fn serve(tcp: &[TcpListener], udp: &[UdpSocket], label: &[u8], stop: &AtomicBool) {
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::Relaxed) {
        let mut busy = false;
        for l in tcp {
            if let Ok((mut s, _)) = l.accept() {
                busy = true;
                let _ = s.set_nonblocking(false);
                let _ = s.set_write_timeout(Some(Duration::from_millis(500)));
                let _ = s.write_all(label);
            }
        }
        for u in udp {
            if let Ok((_, peer)) = u.recv_from(&mut buf) {
                busy = true;
                let _ = u.send_to(label, peer);
            }
        }
        if !busy {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// What a probe got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The label of the namespace that answered (TCP, UDP).
    From(String),
    /// A ping was answered (ICMP carries no label).
    Echo,
    /// Refused (a TCP reset or ICMP unreachable came back).
    Refused,
    /// Nothing came back in time.
    Silent,
    /// The probe could not be sent (e.g. the source namespace is gone).
    Failed(String),
}

/// How long a probe waits for an answer that does not come.
pub const PROBE_WAIT: Duration = Duration::from_secs(1);

/// Connects from `ns` (from `src` when given) to `to` and reads the answering label.
pub fn tcp(ns: &str, src: Option<IpAddr>, to: SocketAddr) -> io::Result<Answer> {
    netns::run_in(ns, move || {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        if let Some(ip) = src {
            s.bind(&SocketAddr::new(ip, 0).into())?;
        }
        match s.connect_timeout(&to.into(), PROBE_WAIT) {
            Ok(()) => {}
            Err(e) => return Ok(failed(&e)),
        }
        let mut stream: TcpStream = s.into();
        stream.set_read_timeout(Some(PROBE_WAIT))?;
        let mut label = Vec::new();
        match stream.read_to_end(&mut label) {
            Ok(_) => {}
            Err(e) if label.is_empty() => return Ok(failed(&e)),
            Err(_) => {}
        }
        Ok(Answer::From(String::from_utf8_lossy(&label).into_owned()))
    })
}

/// Sends one datagram from `ns` (from `src` when given) to `to` and waits for its echo.
pub fn udp(ns: &str, src: Option<IpAddr>, to: SocketAddr) -> io::Result<Answer> {
    netns::run_in(ns, move || {
        let bind = SocketAddr::new(src.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)), 0);
        let u = UdpSocket::bind(bind)?;
        u.set_read_timeout(Some(PROBE_WAIT))?;
        // No route (an outside client to a private address) is an answer too: nothing arrives.
        if let Err(e) = u.send_to(b"q", to) {
            return Ok(failed(&e));
        }
        let mut buf = [0u8; 512];
        match u.recv_from(&mut buf) {
            Ok((n, _)) => Ok(Answer::From(
                String::from_utf8_lossy(&buf[..n]).into_owned(),
            )),
            Err(e) => Ok(failed(&e)),
        }
    })
}

/// One ping from `ns` (from `src` when given) to `to`.
pub fn icmp(ns: &str, src: Option<IpAddr>, to: IpAddr) -> io::Result<Answer> {
    let secs = PROBE_WAIT.as_secs().max(1).to_string();
    let mut args = vec![
        "netns".to_string(),
        "exec".into(),
        ns.into(),
        "ping".into(),
        "-c1".into(),
    ];
    args.extend(["-W".into(), secs]);
    if let Some(ip) = src {
        args.extend(["-I".into(), ip.to_string()]);
    }
    args.push(to.to_string());
    let out = Command::new("ip").args(&args).output()?;
    Ok(if out.status.success() {
        Answer::Echo
    } else {
        Answer::Silent
    })
}

fn failed(e: &io::Error) -> Answer {
    match e.kind() {
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionReset => Answer::Refused,
        _ => Answer::Silent,
    }
}
