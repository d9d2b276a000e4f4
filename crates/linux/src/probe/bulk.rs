//! Bulk TCP transfers between namespaces, for measuring what the dataplane counts: a sink
//! that reads one connection to its end, and a sender that writes a number of bytes.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::dhcp::netns;

/// A listener in a namespace that accepts one connection and counts what it receives until
/// the sender closes it.
pub struct Sink {
    thread: JoinHandle<io::Result<u64>>,
}

impl Sink {
    /// Listens on `addr` inside `ns`.
    pub fn start(ns: &str, addr: SocketAddr) -> io::Result<Sink> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
        let thread = netns::spawn_in(ns, format!("sink-{addr}"), move || {
            let listener = match TcpListener::bind(addr) {
                Ok(l) => {
                    let _ = ready_tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(io::Error::new(e.kind(), e.to_string())));
                    return Err(e);
                }
            };
            let (mut conn, _) = listener.accept()?;
            conn.set_read_timeout(Some(Duration::from_secs(60)))?;
            let mut buf = vec![0u8; 64 * 1024];
            let mut total = 0u64;
            loop {
                match conn.read(&mut buf)? {
                    0 => return Ok(total),
                    n => total += n as u64,
                }
            }
        })?;
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(Sink { thread }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::other("sink thread did not start")),
        }
    }

    /// Waits for the connection to end; answers the bytes received.
    pub fn received(self) -> io::Result<u64> {
        self.thread
            .join()
            .map_err(|_| io::Error::other("sink thread panicked"))?
    }
}

/// Connects from `ns` to `to` and writes `bytes` bytes, then closes (blocking).
pub fn send(ns: &str, to: SocketAddr, bytes: u64) -> io::Result<()> {
    netns::run_in(ns, move || {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(10))?;
        s.set_write_timeout(Some(Duration::from_secs(60)))?;
        let chunk = vec![0x5au8; 64 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            s.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        s.shutdown(std::net::Shutdown::Write)?;
        // Wait for the peer to close: every byte was read.
        let mut b = [0u8; 1];
        let _ = s.read(&mut b);
        Ok(())
    })
}
