//! The thread of one DHCP client (either family): started inside the machine's namespace,
//! stopped on request or when dropped. One place for the start/stop protocol both clients share.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use std::time::{Duration, Instant};

use socket2::Socket;

use super::client::{POLL, Shared, Status};
use super::netns;

/// What waiting for a server's answer gave.
pub(crate) enum Outcome<R> {
    /// A matching reply.
    Reply(Box<R>),
    /// No matching reply in time.
    Timeout,
    /// The owner asked the client to stop.
    Stopped,
}

impl<R> Outcome<R> {
    /// The outcome of a request that could not be sent while the link is down: counted as
    /// unanswered after a short pause.
    pub(crate) fn unanswered<A: Clone>(shared: &Shared<A>, wait: Duration) -> Self {
        std::thread::sleep(wait.min(POLL));
        if shared.stopping() {
            Outcome::Stopped
        } else {
            Outcome::Timeout
        }
    }

    /// Waits up to `wait` for a datagram (at most `max_len` bytes) on `socket` that `accept`
    /// turns into a reply, skipping others and checking for a stop request between receives.
    pub(crate) fn receive<A: Clone>(
        socket: &Socket,
        shared: &Shared<A>,
        wait: Duration,
        max_len: usize,
        accept: impl Fn(&[u8]) -> Option<R>,
    ) -> io::Result<Self> {
        let deadline = Instant::now() + wait;
        let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); max_len];
        while Instant::now() < deadline {
            if shared.stopping() {
                return Ok(Outcome::Stopped);
            }
            match socket.recv(&mut buf) {
                Ok(n) => {
                    // SAFETY: recv initialised the first n bytes.
                    let bytes: Vec<u8> = buf[..n]
                        .iter()
                        .map(|b| unsafe { b.assume_init() })
                        .collect();
                    if let Some(reply) = accept(&bytes) {
                        return Ok(Outcome::Reply(Box::new(reply)));
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(if shared.stopping() {
            Outcome::Stopped
        } else {
            Outcome::Timeout
        })
    }
}

/// The interface a client serves, as its configuration names it.
pub trait ClientInterface: Clone + Send + 'static {
    /// How the client's handle is named in debug output (e.g. `DhcpClient`).
    const HANDLE: &'static str;
    /// Machine namespace.
    fn netns(&self) -> &str;
    /// Interface inside it.
    fn ifname(&self) -> &str;
}

/// A running DHCP client of one family ([`super::DhcpClient`], [`super::Dhcp6Client`]):
/// its configuration and its thread. Dropping it stops the thread (leaving the address in
/// place).
pub struct Client<C, A> {
    config: C,
    worker: Worker<A>,
}

impl<C: ClientInterface, A: Clone + Send + 'static> Client<C, A> {
    /// Starts `run` on the client thread, named `{family}-{ifname}`.
    pub(super) fn spawn(
        config: C,
        family: &str,
        run: fn(&C, &Shared<A>) -> io::Result<()>,
    ) -> io::Result<Self> {
        let cfg = config.clone();
        let label = format!("{family}-{}", config.ifname());
        let worker = Worker::spawn(config.netns(), label, move |shared| run(&cfg, shared))?;
        Ok(Client { config, worker })
    }

    /// The interface's configuration.
    pub fn config(&self) -> &C {
        &self.config
    }

    /// What the client holds now.
    pub fn status(&self) -> Status<A> {
        self.worker.status()
    }

    /// Whether the thread is still running.
    pub fn is_running(&self) -> bool {
        self.worker.is_running()
    }

    /// Stops the thread and waits for it; `flush` removes the applied address (and routes).
    pub fn stop(self, flush: bool) {
        self.worker.stop(flush);
    }
}

impl<C: ClientInterface, A: Clone + Send + std::fmt::Debug + 'static> std::fmt::Debug
    for Client<C, A>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(C::HANDLE)
            .field("netns", &self.config.netns())
            .field("ifname", &self.config.ifname())
            .field("status", &self.status())
            .finish()
    }
}

/// A client thread and the state it shares with its owner.
pub(crate) struct Worker<A> {
    shared: Arc<Shared<A>>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl<A: Clone + Send + 'static> Worker<A> {
    /// Runs `body` on a new OS thread inside `ns` (never on an async worker); when it ends, the
    /// status says why. `label` names the thread and the log line (e.g. `dhcp6-eth0`).
    pub(crate) fn spawn(
        ns: &str,
        label: String,
        body: impl FnOnce(&Shared<A>) -> io::Result<()> + Send + 'static,
    ) -> io::Result<Worker<A>> {
        let shared = Arc::new(Shared::new());
        let thread_shared = shared.clone();
        let netns_name = ns.to_string();
        let thread = netns::spawn_in(ns, label.clone(), move || {
            let result = body(&thread_shared);
            let why = match &result {
                Ok(()) => "stopped".to_string(),
                Err(e) => {
                    tracing::debug!(netns = %netns_name, client = %label, error = %e, "DHCP client ended");
                    e.to_string()
                }
            };
            thread_shared.set(Status::Stopped(why));
            result
        })?;
        Ok(Worker {
            shared,
            thread: Some(thread),
        })
    }

    /// What the client holds now.
    pub(crate) fn status(&self) -> Status<A> {
        self.shared.get()
    }

    /// Whether the thread is still running.
    pub(crate) fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the thread and waits for it (see `Drop`); `flush` removes what the client applied.
    pub(crate) fn stop(self, flush: bool) {
        self.shared.flush_on_stop.store(flush, Ordering::Relaxed);
    }
}

impl<A> Drop for Worker<A> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
