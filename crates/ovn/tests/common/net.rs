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

/// TCP listeners answering each connection with the peer's address; stopped when dropped.
pub struct Listeners(pub Vec<Child>);

impl Listeners {
    pub fn start(&mut self, ns: &str, port: u16) {
        let listen = format!("TCP-LISTEN:{port},reuseaddr,fork");
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "socat", &listen])
            .arg("SYSTEM:echo $SOCAT_PEERADDR")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("socat");
        self.0.push(child);
    }
}

impl Listeners {
    /// A UDP listener on `port` printing what it receives into `into` (a file).
    pub fn start_udp(&mut self, ns: &str, port: u16, into: &std::path::Path) {
        let listen = format!("UDP-RECV:{port},reuseaddr");
        let out = std::fs::File::create(into).expect("udp output");
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "socat", "-u", &listen, "STDOUT"])
            .stdout(out)
            .stderr(Stdio::null())
            .spawn()
            .expect("socat");
        self.0.push(child);
    }

    pub fn start_echo(&mut self, ns: &str, port: u16) {
        let listen = format!("TCP-LISTEN:{port},reuseaddr,fork");
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "socat", &listen, "EXEC:cat"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("socat");
        self.0.push(child);
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

impl Drop for Listeners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
