//! First-packet latency probes: a TCP acceptor inside a machine namespace and a client in the
//! external namespace timing `connect()` (SYN → SYN/ACK; every sample is a new connection, so
//! its SYN passes the NAT prerouting hook as a new conntrack entry). Each runs on its own OS
//! thread that `setns`-es into its namespace, never on a tokio worker.

use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Moves the calling thread into network namespace `ns`.
fn enter(ns: &str) -> io::Result<()> {
    let file = File::open(format!("/run/netns/{ns}"))?;
    // SAFETY: setns only reads the descriptor, which stays open for the call.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `f` on a new thread inside namespace `ns`.
fn spawn_in<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<JoinHandle<io::Result<T>>> {
    let ns = ns.to_string();
    std::thread::Builder::new()
        .name(format!("ns-{ns}"))
        .spawn(move || {
            enter(&ns).map_err(|e| io::Error::new(e.kind(), format!("setns {ns}: {e}")))?;
            f()
        })
}

/// A TCP listener in a namespace that accepts and closes every connection.
pub struct Acceptor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Acceptor {
    /// Listens on `0.0.0.0:port` inside `ns`.
    pub fn start(ns: &str, port: u16) -> io::Result<Acceptor> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel::<io::Result<()>>();
        let flag = stop.clone();
        let thread = spawn_in(ns, move || {
            let listener = match TcpListener::bind(("0.0.0.0", port)) {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                    return Err(e);
                }
            };
            listener.set_nonblocking(true)?;
            let _ = tx.send(Ok(()));
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((c, _)) => drop(c),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })?;
        rx.recv()
            .map_err(|_| io::Error::other("acceptor thread ended"))??;
        Ok(Acceptor {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Times `rounds` TCP connects from namespace `ns` to each of `targets`, interleaved (one to
/// each target per round, so load on the shared machine affects all targets alike), after
/// `warmup` untimed rounds. Returns one sample vector per target.
pub async fn connect_samples(
    ns: &str,
    targets: Vec<SocketAddr>,
    rounds: usize,
    warmup: usize,
) -> io::Result<Vec<Vec<Duration>>> {
    let handle = spawn_in(ns, move || {
        let mut out: Vec<Vec<Duration>> = targets.iter().map(|_| Vec::new()).collect();
        for round in 0..warmup + rounds {
            for (i, t) in targets.iter().enumerate() {
                let start = Instant::now();
                let s = TcpStream::connect_timeout(t, Duration::from_secs(2))
                    .map_err(|e| io::Error::new(e.kind(), format!("connect to {t}: {e}")))?;
                let took = start.elapsed();
                // Abortive close (RST): thousands of samples leave no TIME_WAIT sockets
                // behind for a later SYN with the same 4-tuple to run into.
                let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                drop(s);
                if round >= warmup {
                    out[i].push(took);
                }
            }
        }
        Ok(out)
    })?;
    tokio::task::spawn_blocking(move || handle.join())
        .await
        .map_err(|e| io::Error::other(e.to_string()))?
        .map_err(|_| io::Error::other("probe thread panicked"))?
}
