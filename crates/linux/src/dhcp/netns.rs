//! Running code inside a machine's network namespace on a dedicated OS thread. `setns` changes
//! the namespace of the calling thread only, so it is never done on a tokio worker: every
//! helper here starts its own `std::thread` and the thread ends inside the namespace.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::thread::JoinHandle;

/// Where `ip netns` keeps its named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// Moves the calling thread into the named network namespace (`/run/netns/<name>`).
///
/// Only call this on a thread you own and that never returns to a pool.
pub fn enter(name: &str) -> io::Result<()> {
    let path = format!("{NETNS_DIR}/{name}");
    let file = File::open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace {name}: {e}")))?;
    // SAFETY: setns only reads the descriptor, which stays open for the duration of the call.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("setns into {name}: {e}")));
    }
    Ok(())
}

/// Starts a named thread that enters namespace `ns` and then runs `f`.
pub fn spawn_in<T, F>(ns: &str, thread_name: String, f: F) -> io::Result<JoinHandle<io::Result<T>>>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    let ns = ns.to_string();
    std::thread::Builder::new()
        .name(thread_name)
        .spawn(move || {
            enter(&ns)?;
            f()
        })
}

/// Runs `f` inside namespace `ns` on a fresh thread and waits for it (blocking).
pub fn run_in<T, F>(ns: &str, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    let handle = spawn_in(ns, format!("netns-{ns}"), f)?;
    handle
        .join()
        .map_err(|_| io::Error::other("namespace thread panicked"))?
}

/// Runs `f` inside namespace `ns` from async code without blocking a runtime worker.
pub async fn run_in_async<T, F>(ns: &str, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    let ns = ns.to_string();
    tokio::task::spawn_blocking(move || run_in(&ns, f))
        .await
        .map_err(|e| io::Error::other(format!("namespace task failed: {e}")))?
}

/// Whether the named namespace exists.
pub fn exists(name: &str) -> bool {
    std::path::Path::new(NETNS_DIR).join(name).exists()
}

/// Names of every namespace under [`NETNS_DIR`] starting with `prefix`.
pub fn list(prefix: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect();
    out.sort();
    out
}

/// Writes a sysctl of the calling thread's network namespace (`/proc/sys/...` is resolved
/// against the opener's namespace).
pub fn write_sysctl(key: &str, value: &str) -> io::Result<()> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value)
        .map_err(|e| io::Error::new(e.kind(), format!("sysctl {key}={value}: {e}")))
}
