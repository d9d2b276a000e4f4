//! Probes of a sandbox's workloads from the host: commands in network namespaces, pings, TCP
//! and UDP exchanges through `socat`, listeners that stop when dropped.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a probe that should succeed may take (flows are installed asynchronously).
pub const WAIT: Duration = Duration::from_secs(60);

/// Runs a command; its output (panics if it cannot start).
pub fn run(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Runs a command that must succeed.
pub fn sh(args: &[&str]) {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a command in network namespace `ns`.
pub fn in_ns(ns: &str, args: &[&str]) -> Output {
    let mut all = vec!["ip", "netns", "exec", ns];
    all.extend_from_slice(args);
    run(&all)
}

/// Deletes network namespace `ns` if it exists.
pub fn remove_ns(ns: &str) {
    let _ = Command::new("ip")
        .args(["netns", "del", ns])
        .stderr(Stdio::null())
        .status();
}

/// Whether one ping from namespace `from` to `to` is answered within a second.
pub fn ping(from: &str, to: &str) -> bool {
    in_ns(from, &["ping", "-c1", "-W1", to]).status.success()
}

/// What a TCP listener at `to:port` answers to a connection from namespace `from` (its view of
/// the peer's address), or None when no connection is made.
pub fn tcp(from: &str, to: &str, port: u16) -> Option<String> {
    let target = format!("TCP:{to}:{port},connect-timeout=2");
    let out = in_ns(from, &["socat", "-T3", "-u", &target, "STDOUT"]);
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Probes until `probe` gives a value, failing the test after [`WAIT`].
pub fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + WAIT;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < until, "{what}: not within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Listeners in namespaces, each in a process group of its own so that stopping it (when
/// dropped) also stops the processes it forked for connections — one whose peer can no longer
/// reach it would otherwise wait forever.
pub struct Listeners(pub Vec<Child>);

impl Listeners {
    fn spawn(&mut self, ns: &str, args: &[&str], stdout: Stdio) {
        use std::os::unix::process::CommandExt;
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "socat"])
            .args(args)
            .stdout(stdout)
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("socat");
        self.0.push(child);
    }

    /// A TCP listener on `port` answering each connection with the peer's address.
    pub fn start(&mut self, ns: &str, port: u16) {
        let listen = format!("TCP-LISTEN:{port},reuseaddr,fork");
        self.spawn(ns, &[&listen, "SYSTEM:echo $SOCAT_PEERADDR"], Stdio::null());
    }

    /// An IPv6 TCP listener on `port` answering each connection with the peer's address.
    pub fn start_ipv6(&mut self, ns: &str, port: u16) {
        let listen = format!("TCP6-LISTEN:{port},reuseaddr,fork,ipv6only=1");
        self.spawn(ns, &[&listen, "SYSTEM:echo $SOCAT_PEERADDR"], Stdio::null());
    }

    /// A UDP listener on `port` printing what it receives into `into` (a file).
    pub fn start_udp(&mut self, ns: &str, port: u16, into: &std::path::Path) {
        let listen = format!("UDP-RECV:{port},reuseaddr");
        let out = std::fs::File::create(into).expect("udp output");
        self.spawn(ns, &["-u", &listen, "STDOUT"], out.into());
    }

    /// A TCP listener on `port` echoing what each connection sends.
    pub fn start_echo(&mut self, ns: &str, port: u16) {
        let listen = format!("TCP-LISTEN:{port},reuseaddr,fork");
        self.spawn(ns, &[&listen, "EXEC:cat"], Stdio::null());
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // The whole group: the listener and what it forked.
            let group = format!("-{}", c.id());
            let _ = Command::new("kill")
                .args(["-KILL", "--", &group])
                .stderr(Stdio::null())
                .status();
            let _ = c.wait();
        }
    }
}

/// Sends one UDP datagram `text` from `from`'s port `source_port` to `to:port`.
pub fn udp_send(from: &str, source_port: u16, to: &str, port: u16, text: &str) {
    // `broadcast` lets the same call send to a broadcast address.
    let target = format!("UDP-SENDTO:{to}:{port},sourceport={source_port},reuseaddr,broadcast");
    let mut child = Command::new("ip")
        .args(["netns", "exec", from, "socat", "-u", "STDIN", &target])
        .stdin(Stdio::piped())
        .spawn()
        .expect("socat");
    if let Some(mut input) = child.stdin.take() {
        use std::io::Write;
        let _ = writeln!(input, "{text}");
    }
    let _ = child.wait();
}

/// Whether a TCP connection from `from` to `to:port` is accepted.
pub fn connects(from: &str, to: &str, port: u16) -> bool {
    let target = format!("TCP:{to}:{port},connect-timeout=2");
    in_ns(from, &["socat", "-T1", "-u", "/dev/null", &target])
        .status
        .success()
}

/// An open TCP connection to an echo listener; closed when dropped.
pub struct Connection {
    child: Child,
    input: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Connection {
    pub fn open(from: &str, to: &str, port: u16) -> Option<Connection> {
        use std::io::BufRead;
        let target = format!("TCP:{to}:{port},connect-timeout=2");
        let mut child = Command::new("ip")
            .args(["netns", "exec", from, "socat", "STDIO", &target])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("socat");
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        };
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(output)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut c = Connection {
            child,
            input,
            lines,
        };
        c.echo("hello").map(|_| c)
    }

    /// Sends `text` and returns what comes back within 5 s.
    pub fn echo(&mut self, text: &str) -> Option<String> {
        use std::io::Write;
        writeln!(self.input, "{text}").ok()?;
        self.input.flush().ok()?;
        self.lines.recv_timeout(Duration::from_secs(5)).ok()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
