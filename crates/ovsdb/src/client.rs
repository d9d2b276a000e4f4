//! One JSON-RPC connection to an OVSDB server: calls matched to their replies by id, the
//! server's echo requests answered, monitor updates handed to the caller.
//!
//! Two tasks own the socket: the writer sends what the calls (and the reader's echo replies)
//! queue; the reader cuts the byte stream into JSON texts (sent back to back, as OVSDB does:
//! see `framing.rs`), parses each once and completes calls. When the connection ends, every pending call and every later one fails
//! with [`Error::Disconnected`]; the update channel closes.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

use crate::address::Address;
use crate::error::Error;
use crate::framing::{Framer, NotJson};
use crate::tls::Tls;

/// The largest message accepted from a server (a monitor's first reply carries whole tables).
const MAX_MESSAGE: usize = 256 << 20;

/// A change notification of a monitor (`update` or `update2`).
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// The notification's method (`update`, `update2`).
    pub method: String,
    /// The monitor id given to [`Client::monitor`].
    pub monitor: Value,
    /// Table name → row UUID → `{"old": …, "new": …}` (RFC 7047 §4.1.6).
    pub tables: Value,
}

type Pending = HashMap<u64, (String, oneshot::Sender<Result<Value, Error>>)>;

#[derive(Default)]
struct State {
    pending: Pending,
    /// Why the connection ended, once it has.
    closed: Option<String>,
}

struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the connection closed and fails every pending call.
    fn close(&self, reason: String) {
        let pending = {
            let mut st = self.state();
            if st.closed.is_none() {
                st.closed = Some(reason.clone());
            }
            std::mem::take(&mut st.pending)
        };
        for (_, (_, tx)) in pending {
            let _ = tx.send(Err(Error::Disconnected(reason.clone())));
        }
    }
}

/// A connection to one OVSDB server.
pub struct Client {
    address: Address,
    writer: mpsc::UnboundedSender<Vec<u8>>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    /// `transact` calls made on this connection (answered or not).
    transactions: AtomicU64,
    tasks: [JoinHandle<()>; 2],
}

impl Drop for Client {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Client {
    /// Opens a connection; monitor updates arrive on the returned receiver. An `ssl:` address
    /// needs [`Client::connect_with`] and its TLS files.
    pub async fn connect(
        address: &Address,
    ) -> Result<(Client, mpsc::UnboundedReceiver<Update>), Error> {
        Self::connect_with(address, None).await
    }

    /// Opens a connection, over TLS with `tls` for an `ssl:` address; monitor updates arrive on
    /// the returned receiver.
    pub async fn connect_with(
        address: &Address,
        tls: Option<&Tls>,
    ) -> Result<(Client, mpsc::UnboundedReceiver<Update>), Error> {
        let connect_err = |source| Error::Connect {
            address: address.to_string(),
            source,
        };
        match address {
            Address::Unix(path) => {
                let s = UnixStream::connect(path).await.map_err(connect_err)?;
                let (r, w) = s.into_split();
                Ok(Self::start(address.clone(), r, w))
            }
            Address::Tcp(host, port) => {
                let s = tcp(host, *port).await.map_err(connect_err)?;
                let (r, w) = s.into_split();
                Ok(Self::start(address.clone(), r, w))
            }
            Address::Ssl(host, port) => {
                let Some(tls) = tls else {
                    return Err(connect_err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "an ssl: address needs a private key, a certificate and a CA certificate",
                    )));
                };
                let name = ServerName::try_from(host.clone())
                    .map_err(|e| connect_err(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
                let s = tcp(host, *port).await.map_err(connect_err)?;
                let s = TlsConnector::from(tls.config.clone())
                    .connect(name, s)
                    .await
                    .map_err(connect_err)?;
                let (r, w) = tokio::io::split(s);
                Ok(Self::start(address.clone(), r, w))
            }
        }
    }

    fn start<R, W>(address: Address, r: R, w: W) -> (Client, mpsc::UnboundedReceiver<Update>)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
        });
        let (writer, queue) = mpsc::unbounded_channel();
        let (updates_tx, updates) = mpsc::unbounded_channel();
        let write_task = tokio::spawn(write_loop(w, queue, shared.clone()));
        let read_task = tokio::spawn(read_loop(r, writer.downgrade(), updates_tx, shared.clone()));
        let client = Client {
            address,
            writer,
            shared,
            next_id: AtomicU64::new(1),
            transactions: AtomicU64::new(0),
            tasks: [write_task, read_task],
        };
        (client, updates)
    }

    /// The address this client is connected to.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Why the connection ended, or None while it is open.
    pub fn closed(&self) -> Option<String> {
        self.shared.state().closed.clone()
    }

    /// How many transactions ([`Client::transact`]) this connection has sent, whatever their
    /// outcome: the cost of a caller's operation in round trips to the server.
    pub fn transactions(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
    }

    /// Calls `method` with `params` and waits for its result.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, Error> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.state();
            if let Some(reason) = &st.closed {
                return Err(Error::Disconnected(reason.clone()));
            }
            st.pending.insert(id, (method.to_string(), tx));
        }
        let msg = json!({"method": method, "params": params, "id": id});
        let sent = serde_json::to_vec(&msg)
            .map_err(|e| Error::Protocol(format!("cannot encode {method}: {e}")))
            .and_then(|bytes| {
                self.writer
                    .send(bytes)
                    .map_err(|_| Error::Disconnected("the writer has stopped".into()))
            });
        if let Err(e) = sent {
            self.shared.state().pending.remove(&id);
            return Err(e);
        }
        rx.await
            .unwrap_or_else(|_| Err(Error::Disconnected("the connection was dropped".into())))
    }

    /// The databases the server holds.
    pub async fn list_databases(&self) -> Result<Vec<String>, Error> {
        let v = self.call("list_dbs", json!([])).await?;
        serde_json::from_value(v).map_err(|e| Error::Protocol(format!("list_dbs: {e}")))
    }

    /// Runs `operations` on `database` as one transaction: all apply or none does. Returns one
    /// result per operation (an insert's `{"uuid": ["uuid", id]}`, a select's `{"rows": […]}`,
    /// an update's `{"count": n}`…).
    pub async fn transact(
        &self,
        database: &str,
        operations: Vec<Value>,
    ) -> Result<Vec<Value>, Error> {
        self.transactions.fetch_add(1, Ordering::Relaxed);
        let n = operations.len();
        let mut params = Vec::with_capacity(n + 1);
        params.push(Value::from(database));
        params.extend(operations);
        let result = self.call("transact", Value::Array(params)).await?;
        let Value::Array(results) = result else {
            return Err(Error::Protocol(format!(
                "transact returned {result} instead of a list"
            )));
        };
        for (i, r) in results.iter().enumerate() {
            if let Some(error) = r.get("error").and_then(Value::as_str) {
                return Err(Error::Transaction {
                    operation: (i < n).then_some(i),
                    error: error.to_string(),
                    details: r.get("details").and_then(Value::as_str).map(str::to_string),
                });
            }
        }
        if results.len() < n {
            return Err(Error::Protocol(format!(
                "transact returned {} results for {n} operations",
                results.len()
            )));
        }
        Ok(results.into_iter().take(n).collect())
    }

    /// Starts monitor `id` on `database` (`requests`: table → `{"columns": […]}`) and returns the
    /// current rows in the shape of an [`Update`]'s `tables`; later changes arrive as updates.
    pub async fn monitor(
        &self,
        database: &str,
        id: Value,
        requests: Value,
    ) -> Result<Value, Error> {
        self.call("monitor", json!([database, id, requests])).await
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut w: W,
    mut queue: mpsc::UnboundedReceiver<Vec<u8>>,
    shared: Arc<Shared>,
) {
    while let Some(bytes) = queue.recv().await {
        if let Err(e) = w.write_all(&bytes).await {
            shared.close(format!("write failed: {e}"));
            return;
        }
    }
    let _ = w.shutdown().await;
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut r: R,
    writer: mpsc::WeakUnboundedSender<Vec<u8>>,
    updates: mpsc::UnboundedSender<Update>,
    shared: Arc<Shared>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 << 10);
    let mut chunk = vec![0u8; 64 << 10];
    let mut framer = Framer::default();
    let reason = loop {
        let n = match r.read(&mut chunk).await {
            Ok(0) => break "the server closed the connection".to_string(),
            Ok(n) => n,
            Err(e) => break format!("read failed: {e}"),
        };
        buf.extend_from_slice(&chunk[..n]);
        let ends = match framer.scan(&buf) {
            Ok(ends) => ends,
            Err(NotJson(b)) => break format!("unparsable message: unexpected byte {b:#04x}"),
        };
        let mut used = 0;
        let mut failure = None;
        for end in ends {
            let parsed = serde_json::from_slice::<Value>(&buf[used..end]);
            used = end;
            let handled = match parsed {
                Ok(msg) => dispatch(msg, &writer, &updates, &shared),
                Err(e) => Err(format!("unparsable message: {e}")),
            };
            if let Err(e) = handled {
                failure = Some(e);
                break;
            }
        }
        if let Some(reason) = failure {
            break reason;
        }
        buf.drain(..used);
        framer.consumed(used);
        if buf.len() > MAX_MESSAGE {
            break format!("a message larger than {MAX_MESSAGE} bytes");
        }
    };
    tracing::debug!(%reason, "OVSDB connection ended");
    shared.close(reason);
}

/// Handles one message from the server: a reply, an echo request or a notification.
fn dispatch(
    msg: Value,
    writer: &mpsc::WeakUnboundedSender<Vec<u8>>,
    updates: &mpsc::UnboundedSender<Update>,
    shared: &Shared,
) -> Result<(), String> {
    if let Some(method) = msg.get("method").and_then(Value::as_str) {
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        match method {
            "echo" => {
                let reply = json!({"result": params, "error": null, "id": msg.get("id")});
                if let (Some(w), Ok(bytes)) = (writer.upgrade(), serde_json::to_vec(&reply)) {
                    let _ = w.send(bytes);
                }
            }
            "update" | "update2" => {
                let (monitor, tables) = match params.as_array().map(Vec::as_slice) {
                    Some([monitor, tables]) => (monitor.clone(), tables.clone()),
                    _ => return Err(format!("a {method} notification without two parameters")),
                };
                let _ = updates.send(Update {
                    method: method.to_string(),
                    monitor,
                    tables,
                });
            }
            other => tracing::debug!(method = other, "OVSDB notification ignored"),
        }
        return Ok(());
    }
    let Some(id) = msg.get("id").and_then(Value::as_u64) else {
        return Err(format!("a reply without a numeric id: {msg}"));
    };
    let Some((method, tx)) = shared.state().pending.remove(&id) else {
        // A reply to a call that is no longer waited for.
        return Ok(());
    };
    let error = msg.get("error").filter(|e| !e.is_null());
    let result = match error {
        None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
        Some(e) => Err(Error::Rpc {
            method,
            error: e
                .get("error")
                .and_then(Value::as_str)
                .or(e.as_str())
                .map_or_else(|| e.to_string(), str::to_string),
            details: e.get("details").and_then(Value::as_str).map(str::to_string),
        }),
    };
    let _ = tx.send(result);
    Ok(())
}

/// A TCP connection with Nagle off (calls are small and answered one by one).
async fn tcp(host: &str, port: u16) -> io::Result<TcpStream> {
    let s = TcpStream::connect((host, port)).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{BufReader, duplex};

    /// A client over an in-memory pipe, and the server's end of it.
    fn pair() -> (
        Client,
        mpsc::UnboundedReceiver<Update>,
        tokio::io::DuplexStream,
    ) {
        let (ours, theirs) = duplex(1 << 20);
        let (r, w) = tokio::io::split(ours);
        let (c, u) = Client::start(Address::Unix("/mem".into()), r, w);
        (c, u, theirs)
    }

    #[tokio::test]
    async fn replies_split_across_reads_and_glued_together_complete_their_calls() {
        let (c, _u, mut server) = pair();
        let c = Arc::new(c);
        let (a, b) = (c.clone(), c.clone());
        let first = tokio::spawn(async move { a.call("one", json!([])).await });
        let second = tokio::spawn(async move { b.call("two", json!([])).await });
        // Read both requests (ids 1 and 2 in some order), then answer in pieces.
        let mut lines = Vec::new();
        let mut buf = vec![0u8; 4096];
        while lines.len() < 2 {
            let n = server.read(&mut buf).await.unwrap();
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            lines.extend(
                serde_json::Deserializer::from_str(&text)
                    .into_iter::<Value>()
                    .map(Result::unwrap),
            );
        }
        let id_of = |m: &str| {
            lines
                .iter()
                .find(|l| l["method"] == m)
                .map(|l| l["id"].clone())
                .unwrap()
        };
        let reply = format!(
            "{}{}",
            json!({"id": id_of("two"), "result": 2, "error": null}),
            json!({"id": id_of("one"), "result": 1, "error": null})
        );
        let (head, tail) = reply.split_at(7);
        server.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        server.write_all(tail.as_bytes()).await.unwrap();
        assert_eq!(first.await.unwrap().unwrap(), json!(1));
        assert_eq!(second.await.unwrap().unwrap(), json!(2));
    }

    #[tokio::test]
    async fn echo_requests_are_answered_and_updates_delivered() {
        let (_c, mut updates, server) = pair();
        let (r, mut w) = tokio::io::split(server);
        let echo = json!({"method": "echo", "params": ["x"], "id": "e1"});
        let update = json!({"method": "update", "params": ["m", {"ACL": {}}], "id": null});
        w.write_all(format!("{echo}\n{update}").as_bytes())
            .await
            .unwrap();
        let reply = tokio::time::timeout(std::time::Duration::from_secs(5), next_message(r))
            .await
            .expect("the echo is answered within 5 s");
        assert_eq!(reply, json!({"result": ["x"], "error": null, "id": "e1"}));
        let u = updates.recv().await.unwrap();
        assert_eq!(
            (u.method.as_str(), u.monitor.clone()),
            ("update", json!("m"))
        );
    }

    /// The next JSON text the client sends.
    async fn next_message(r: impl AsyncRead + Unpin) -> Value {
        let mut reader = BufReader::new(r);
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            reader.read_exact(&mut byte).await.unwrap();
            got.push(byte[0]);
            if let Ok(v) = serde_json::from_slice::<Value>(&got) {
                return v;
            }
        }
    }

    #[tokio::test]
    async fn a_closed_connection_fails_pending_and_later_calls() {
        let (c, mut updates, server) = pair();
        let c = Arc::new(c);
        let waiting = {
            let c = c.clone();
            tokio::spawn(async move { c.call("transact", json!(["db"])).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(server);
        let e = waiting.await.unwrap().unwrap_err();
        assert!(e.is_disconnect(), "{e}");
        assert!(c.call("echo", json!([])).await.unwrap_err().is_disconnect());
        assert!(c.closed().is_some());
        assert!(updates.recv().await.is_none());
    }

    #[tokio::test]
    async fn garbage_from_the_server_ends_the_connection() {
        let (c, _u, mut server) = pair();
        server.write_all(b"{\"id\": 1} ]]]").await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let reason = c.closed().expect("closed");
        assert!(reason.contains("unparsable"), "{reason}");
    }

    #[tokio::test]
    async fn refused_operations_name_the_operation_and_the_server_reason() {
        let (c, _u, server) = pair();
        let c = Arc::new(c);
        let caller = c.clone();
        let (r, mut w) = tokio::io::split(server);
        let call = tokio::spawn(async move {
            caller
                .transact(
                    "OVN_Northbound",
                    vec![json!({"op": "comment", "comment": "x"}); 2],
                )
                .await
        });
        let req = next_message(r).await;
        let reply = json!({"id": req["id"], "error": null, "result": [
            {}, {"error": "constraint violation", "details": "name must be unique"}
        ]});
        w.write_all(reply.to_string().as_bytes()).await.unwrap();
        let outcome = call.await.unwrap();
        assert_eq!(c.transactions(), 1, "a refused transaction still counts");
        match outcome {
            Err(Error::Transaction {
                operation,
                error,
                details,
            }) => {
                assert_eq!(operation, Some(1));
                assert_eq!(error, "constraint violation");
                assert_eq!(details.as_deref(), Some("name must be unique"));
            }
            other => panic!("{other:?}"),
        }
    }
}
