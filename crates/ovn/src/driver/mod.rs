//! The `ovn` driver of the fabric manager role: every operation is planned on the shared fabric
//! model ([`osac_backends::fabric_model`]: validation, allocation, the records to write), then
//! the records and the northbound rows they render ([`rows`]) are written to the northbound
//! database, which is the driver's only state ([`records`]).
//!
//! An operation's writes are: references dropped first ([`nb::detach`]: a port from its switch,
//! a gateway or NAT row from its router), then one [`nb::converge`] of the rows it renders and
//! the record rows it puts, deleting the root rows and record rows of what it removed. Every
//! step is idempotent, so an operation that failed half-way converges when called again; the
//! model in memory changes only when the writes succeeded.

pub mod k8s;
mod manager;
pub mod records;
mod rows;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;

use ipnet::{IpNet, Ipv6Net};
use osac_backends::fabric_model::{Change, FabricState, Plan, Record};
use osac_backends::net::lowest_free;
use osac_backends::{OpError, Registration};
use osac_ovsdb::{Address, Client, Tls, TlsFiles};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::nb::{self, Row, Scope};
use crate::render::external::{self, Ipv6Transit, ProviderNetwork};

/// What an `ovn` registration says (its `ovn:` block).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OvnSettings {
    /// The northbound database: `unix:PATH`, `tcp:HOST:PORT` or `ssl:HOST:PORT`, a comma-separated list for
    /// the members of a clustered database.
    pub northbound: String,
    /// The provider network the ExternalIP pools' addresses live on.
    #[serde(flatten)]
    pub provider: ProviderSettings,
    /// The chassis that run the routers' uplinks (gateway and NAT), most preferred first.
    pub gateway_chassis: Vec<String>,
    /// Seconds between two checks that put back rows changed behind the driver's back
    /// ([`OvnFabric::resync`], run by the controllers through
    /// `FabricManager::repair_drift`); 0 turns the check off.
    #[serde(default = "default_resync_seconds")]
    pub resync_seconds: u64,
    /// For `ssl:` members: the client's private key (PEM), as `ovn-nbctl --private-key`.
    #[serde(default)]
    pub private_key: Option<PathBuf>,
    /// For `ssl:` members: the client's certificate (PEM), as `ovn-nbctl --certificate`.
    #[serde(default)]
    pub certificate: Option<PathBuf>,
    /// For `ssl:` members: the CA certificate the database's certificate must chain to (PEM),
    /// as `ovn-nbctl --ca-cert`.
    #[serde(default)]
    pub ca_certificate: Option<PathBuf>,
    /// Where ports are bound ([`OvnSettings::chassis_for`]): a port's host — a hosting cluster
    /// (the ports of its VMs) or an inventory host (a bare-metal server's or a cluster agent's
    /// NICs) — to the chassis it runs on. A host not listed goes to the chassis listed under
    /// [`ANY_HOST`], else to the chassis of its own name.
    #[serde(default)]
    pub chassis: BTreeMap<String, Vec<String>>,
}

/// The [`OvnSettings::chassis`] entry for every host not listed by name.
pub const ANY_HOST: &str = "*";

fn default_resync_seconds() -> u64 {
    30
}

/// The provider network, as the registration names it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSettings {
    /// The physical network's name, which hypervisors map to a bridge
    /// (`ovn-bridge-mappings`).
    pub provider_network: String,
    /// The prefix the routers' uplink (transit) addresses come from.
    pub transit_cidr: IpNet,
    /// The next hop toward the outside on the provider network.
    pub provider_gateway: IpAddr,
    /// A second transit prefix, IPv6, when `transit_cidr` is IPv4: routers get an address in
    /// both, so IPv6 egress, NAT gateways and ExternalIP attachments work too.
    #[serde(default)]
    pub transit_ipv6_cidr: Option<Ipv6Net>,
    /// The IPv6 next hop toward the outside (with `transit_ipv6_cidr`).
    #[serde(default)]
    pub provider_ipv6_gateway: Option<Ipv6Addr>,
}

impl ProviderSettings {
    /// The transit settings fit together: each next hop in its prefix, the IPv6 pair complete
    /// and only beside an IPv4 `transit_cidr`.
    fn check(&self) -> Result<(), OvnError> {
        let err = |m: String| Err(OvnError::Settings(m));
        if !self.transit_cidr.contains(&self.provider_gateway) {
            return err(format!(
                "provider_gateway {} is not in transit_cidr {}",
                self.provider_gateway, self.transit_cidr
            ));
        }
        match (self.transit_ipv6_cidr, self.provider_ipv6_gateway) {
            (None, None) => Ok(()),
            (Some(cidr), Some(gateway)) => {
                if !self.transit_cidr.addr().is_ipv4() {
                    return err(
                        "transit_ipv6_cidr is the second prefix of an IPv4 transit_cidr".into(),
                    );
                }
                if !cidr.contains(&gateway) {
                    return err(format!(
                        "provider_ipv6_gateway {gateway} is not in transit_ipv6_cidr {cidr}"
                    ));
                }
                Ok(())
            }
            _ => err("transit_ipv6_cidr and provider_ipv6_gateway go together".into()),
        }
    }
}

impl OvnSettings {
    /// The TLS files of `ssl:` members, loaded: all three are needed when a member is `ssl:`,
    /// and are refused when none is (they would be ignored).
    fn tls(&self, addresses: &[Address]) -> Result<Option<Tls>, OvnError> {
        let ssl = addresses.iter().any(|a| matches!(a, Address::Ssl(..)));
        let files = (&self.private_key, &self.certificate, &self.ca_certificate);
        match (ssl, files) {
            (true, (Some(key), Some(cert), Some(ca))) => Tls::load(&TlsFiles {
                private_key: key.clone(),
                certificate: cert.clone(),
                ca_certificate: ca.clone(),
            })
            .map(Some)
            .map_err(|e| OvnError::Settings(e.to_string())),
            (true, _) => Err(OvnError::Settings(
                "an ssl: northbound member needs private_key, certificate and ca_certificate"
                    .into(),
            )),
            (false, (None, None, None)) => Ok(None),
            (false, _) => Err(OvnError::Settings(
                "private_key, certificate and ca_certificate are for ssl: northbound members; none is ssl:"
                    .into(),
            )),
        }
    }

    /// The provider network in render form.
    pub fn provider(&self) -> ProviderNetwork {
        let p = &self.provider;
        ProviderNetwork {
            network_name: p.provider_network.clone(),
            transit_cidr: p.transit_cidr,
            gateway: p.provider_gateway,
            ipv6: p
                .transit_ipv6_cidr
                .zip(p.provider_ipv6_gateway)
                .map(|(cidr, gateway)| Ipv6Transit { cidr, gateway }),
        }
    }

    /// The gateway chassis names, most preferred first.
    pub fn gateway_chassis_names(&self) -> Vec<&str> {
        self.gateway_chassis.iter().map(String::as_str).collect()
    }

    /// The chassis a port of `host` with interface `interface` is bound on
    /// (`options:requested-chassis`). A VM's port (`interface` = `<vm id>/<nic>`, `host` = its
    /// hosting cluster) goes to one chassis of the cluster's, chosen by the VM's id, so every
    /// NIC of a VM is on the same chassis and the choice never changes; an inventory host's
    /// port to one chassis of those listed for it (or under [`ANY_HOST`]), chosen by the host,
    /// or to the chassis named like the host.
    pub fn chassis_for(&self, host: &str, interface: &str) -> String {
        let listed = |key: &str| self.chassis.get(key).filter(|l| !l.is_empty());
        let Some(list) = listed(host).or_else(|| listed(ANY_HOST)) else {
            return host.to_string();
        };
        let machine = interface.split_once('/').map_or(host, |(vm, _)| vm);
        let len = u64::try_from(list.len()).unwrap_or(1);
        let index = usize::try_from(osac_model::hash::fnv1a64(machine.bytes()) % len).unwrap_or(0);
        list[index].clone()
    }
}

/// Why an `ovn` manager cannot start.
#[derive(Debug, thiserror::Error)]
pub enum OvnError {
    /// A setting is wrong.
    #[error("ovn settings: {0}")]
    Settings(String),
    /// The northbound database could not be reached or refused our rows.
    #[error("ovn northbound database: {0}")]
    Northbound(String),
    /// The records in the northbound database cannot be read.
    #[error(transparent)]
    Records(#[from] records::LoadError),
}

/// A registered `ovn` fabric manager. Operations are serialised (one northbound writer).
pub struct OvnFabric {
    registration: Registration,
    settings: OvnSettings,
    provider: ProviderNetwork,
    addresses: Vec<Address>,
    tls: Option<Tls>,
    inner: Mutex<Inner>,
}

struct Inner {
    client: Option<Client>,
    /// Transactions sent on connections since dropped.
    past_transactions: u64,
    /// How operations read the northbound database.
    reads: nb::Reads,
    state: FabricState,
    /// Each VirtualNetwork router's uplink addresses, one per transit prefix.
    transit: BTreeMap<String, Vec<IpAddr>>,
}

impl Inner {
    /// Drops the connection (the next operation opens a new one), keeping its count.
    fn drop_client(&mut self) {
        if let Some(client) = self.client.take() {
            self.past_transactions += client.transactions();
        }
    }
}

/// What an operation writes besides its records.
#[derive(Default)]
struct Writes {
    /// References dropped first: (parent table, parent key, column, child table, child key).
    detach: Vec<(&'static str, String, &'static str, &'static str, String)>,
    /// Rows to make exist as rendered.
    rows: Vec<Row>,
    /// Root rows to delete.
    delete: BTreeSet<(&'static str, String)>,
}

impl Writes {
    /// Writes of rendered rows only.
    fn rows(rows: Vec<Row>) -> Self {
        Writes {
            rows,
            ..Writes::default()
        }
    }

    /// Writes that drop one reference: `parent` (table, key) no longer refers through
    /// `column` to `child` (table, key).
    fn detach(
        parent: (&'static str, String),
        column: &'static str,
        child: (&'static str, String),
    ) -> Self {
        Writes {
            detach: vec![(parent.0, parent.1, column, child.0, child.1)],
            ..Writes::default()
        }
    }
}

/// The rows of the record a plan just wrote (`record`, a `what`), rendered for the tenant of
/// its VirtualNetwork (`vn` of it).
fn rendered<T>(
    state: &FabricState,
    record: Option<&T>,
    what: &str,
    vn: fn(&T) -> &str,
    render: fn(&T, &str) -> Vec<Row>,
) -> Result<Writes, OpError> {
    let r = recorded(record, what)?;
    Ok(Writes::rows(render(r, rows::tenant_of(state, vn(r)))))
}

/// The record a plan just wrote, or the failure that says it is missing.
fn recorded<'a, T>(record: Option<&'a T>, what: &str) -> Result<&'a T, OpError> {
    record.ok_or_else(|| OpError::permanent(format!("the {what} was not recorded")))
}

fn northbound_failure(e: impl std::fmt::Display) -> OpError {
    OpError::transient(format!("the OVN northbound database failed: {e}"))
}

impl OvnFabric {
    /// Connects to the northbound database, makes sure the provider network's switch exists
    /// and loads the records of the fabric model from the database.
    pub async fn open(registration: Registration, settings: OvnSettings) -> Result<Self, OvnError> {
        let addresses = Address::parse_list(&settings.northbound)
            .map_err(|e| OvnError::Settings(e.to_string()))?;
        settings.provider.check()?;
        if settings.gateway_chassis.is_empty() {
            return Err(OvnError::Settings(
                "gateway_chassis needs at least one chassis".into(),
            ));
        }
        let provider = settings.provider();
        let tls = settings.tls(&addresses)?;
        let client = connect(&addresses, tls.as_ref())
            .await
            .map_err(|e| OvnError::Northbound(e.to_string()))?;
        nb::converge(
            &client,
            &[external::provider_switch(&provider)],
            &Scope::Keys(BTreeSet::new()),
        )
        .await
        .map_err(|e| OvnError::Northbound(e.to_string()))?;
        let loaded = records::load(&client).await?;
        Ok(OvnFabric {
            registration,
            settings,
            provider,
            addresses,
            tls,
            inner: Mutex::new(Inner {
                client: Some(client),
                past_transactions: 0,
                reads: nb::Reads::default(),
                state: loaded.state,
                transit: loaded.transit,
            }),
        })
    }

    /// The settings the manager runs with.
    pub fn settings(&self) -> &OvnSettings {
        &self.settings
    }

    /// How many northbound transactions the manager has sent since it was opened (its opening
    /// included), on every connection it used: the difference across operations is the round
    /// trips they cost.
    pub async fn northbound_transactions(&self) -> u64 {
        let inner = self.inner.lock().await;
        inner.past_transactions + inner.client.as_ref().map_or(0, Client::transactions)
    }

    /// Makes operations read the northbound database as `reads` says (the default reads only
    /// the rows an operation touches; [`nb::Reads::Everything`] is kept to measure against).
    pub async fn set_reads(&self, reads: nb::Reads) {
        self.inner.lock().await.reads = reads;
    }

    /// A copy of the fabric model's records (tests, dev tooling).
    pub async fn state(&self) -> FabricState {
        self.inner.lock().await.state.clone()
    }

    /// Makes the northbound database hold exactly what the model renders: every row of ours
    /// changed or deleted behind the driver's back is put back, every root row of ours the
    /// model does not render is deleted. Returns what it changed (nothing when nothing
    /// drifted).
    pub async fn resync(&self) -> Result<nb::Changes, OpError> {
        let mut inner = self.inner.lock().await;
        let mut wanted = vec![external::provider_switch(&self.provider)];
        let state = &inner.state;
        for v in state.vns() {
            wanted.extend(self.vn_rows(&inner, &v.virtual_network_id)?);
        }
        for s in state.subnets() {
            wanted.extend(rows::subnet(
                s,
                rows::tenant_of(state, &s.virtual_network_id),
            ));
        }
        for r in state.records() {
            let transit = match r {
                Record::VirtualNetwork(v) => inner.transit.get(&v.virtual_network_id).cloned(),
                _ => None,
            };
            wanted.push(records::row(r, transit).map_err(|e| {
                OpError::permanent(format!("record '{}' cannot be encoded: {e}", r.key()))
            })?);
            match r {
                Record::SecurityGroup(g) => wanted.push(rows::security_group(
                    g,
                    rows::tenant_of(state, &g.virtual_network_id),
                )),
                Record::Dnat(d) => wanted.push(rows::external_ip_attachment(
                    d,
                    rows::tenant_of(state, &d.virtual_network_id),
                )),
                _ => {}
            }
        }
        // Ports last: they reference their switches, DHCP options and groups.
        for a in state.attachments() {
            wanted.push(rows::network_attachment(
                a,
                rows::tenant_of(state, &a.virtual_network_id),
                &self.settings.chassis_for(&a.host, &a.interface),
            ));
        }
        let scope = Scope::All(BTreeSet::from([
            "Logical_Router",
            "Logical_Switch",
            "Port_Group",
            "DHCP_Options",
            records::TABLE,
        ]));
        let client = self.client(&mut inner).await?;
        let converged = within_deadline(async {
            nb::converge(client, &wanted, &scope)
                .await
                .map_err(converge_failure)
        })
        .await;
        let changes = match converged {
            Ok(changes) => changes,
            Err(e) => {
                if matches!(e, osac_ovsdb::Error::Disconnected(_)) {
                    inner.drop_client();
                }
                return Err(northbound_failure(e));
            }
        };
        Ok(changes)
    }

    /// Plans an operation on the model, writes what it changes and what `render` renders from
    /// the model with the changes applied, then keeps the changes. `render` is also given the
    /// records the changes replace.
    async fn run<A>(
        &self,
        plan: impl FnOnce(&FabricState) -> Plan<A>,
        render: impl FnOnce(&Self, &Inner, &[Option<Record>]) -> Result<Writes, OpError>,
    ) -> Result<A, OpError> {
        let mut inner = self.inner.lock().await;
        let (changes, response) = plan(&inner.state)?;
        let before: Vec<Option<Record>> = changes
            .iter()
            .map(|(key, _)| inner.state.get(key).cloned())
            .collect();
        for (key, record) in &changes {
            inner.state.apply(key.clone(), record.clone());
        }
        let written = match render(self, &inner, &before) {
            Ok(writes) => self.write(&mut inner, &changes, writes).await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            for ((key, _), old) in changes.into_iter().zip(before) {
                inner.state.apply(key, old);
            }
            return Err(e);
        }
        for ((_, record), old) in changes.iter().zip(&before) {
            if record.is_none()
                && let Some(Record::VirtualNetwork(v)) = old
            {
                inner.transit.remove(&v.virtual_network_id);
            }
        }
        Ok(response)
    }

    /// Writes an operation: its detaches, then one converge of its rendered rows and record
    /// rows.
    async fn write(
        &self,
        inner: &mut Inner,
        changes: &[Change],
        mut writes: Writes,
    ) -> Result<(), OpError> {
        for (key, record) in changes {
            match record {
                Some(r) => {
                    let transit = match r {
                        Record::VirtualNetwork(v) => {
                            inner.transit.get(&v.virtual_network_id).cloned()
                        }
                        _ => None,
                    };
                    let row = records::row(r, transit).map_err(|e| {
                        OpError::permanent(format!("record '{key}' cannot be encoded: {e}"))
                    })?;
                    writes.rows.push(row);
                }
                None => {
                    writes
                        .delete
                        .insert((records::TABLE, records::row_key(key)));
                }
            }
        }
        let reads = inner.reads;
        let client = self.client(inner).await?;
        let result = within_deadline(async {
            for (table, key, column, child_table, child_key) in &writes.detach {
                let (parent, child) = ((*table, key.as_str()), (*child_table, child_key.as_str()));
                nb::detach_reading(client, parent, column, child, reads).await?;
            }
            nb::converge_reading(client, &writes.rows, &Scope::Keys(writes.delete), reads)
                .await
                .map_err(converge_failure)?;
            Ok::<(), osac_ovsdb::Error>(())
        })
        .await;
        if let Err(e) = result {
            if matches!(e, osac_ovsdb::Error::Disconnected(_)) {
                inner.drop_client();
            }
            return Err(northbound_failure(e));
        }
        Ok(())
    }

    /// The connection, reconnecting (to any member of a clustered database) when it is gone.
    async fn client<'a>(&self, inner: &'a mut Inner) -> Result<&'a Client, OpError> {
        if inner.client.is_none() {
            inner.client = Some(
                connect(&self.addresses, self.tls.as_ref())
                    .await
                    .map_err(northbound_failure)?,
            );
        }
        inner
            .client
            .as_ref()
            .ok_or_else(|| northbound_failure("no connection"))
    }

    /// The lowest free transit address in each transit prefix of the provider network (never
    /// its next hop).
    fn pick_transit(&self, inner: &Inner) -> Result<Vec<IpAddr>, OpError> {
        let used: BTreeSet<IpAddr> = inner.transit.values().flatten().copied().collect();
        self.provider
            .transit_prefixes()
            .into_iter()
            .map(|(net, gateway)| {
                lowest_free(net, &|a| used.contains(a), &[IpNet::from(gateway)])
                    .ok_or_else(|| OpError::permanent(format!("transit range {net} is exhausted")))
            })
            .collect()
    }

    /// VirtualNetwork `vn`'s uplink addresses, one per transit prefix.
    fn transit_of<'a>(&self, inner: &'a Inner, vn: &str) -> Result<&'a [IpAddr], OpError> {
        inner.transit.get(vn).map(Vec::as_slice).ok_or_else(|| {
            OpError::permanent(format!("virtual network '{vn}' has no transit address"))
        })
    }

    /// The rows of VirtualNetwork `vn` as the model holds it.
    fn vn_rows(&self, inner: &Inner, vn: &str) -> Result<Vec<Row>, OpError> {
        let v = inner.state.required_vn(vn)?;
        let transit = self.transit_of(inner, vn)?;
        // Egress per family: the NAT gateway's address for its family, else the transit one.
        let nat = inner.state.nat_gateway_of(vn).map(|n| n.external_address);
        let egress: Vec<IpAddr> = transit
            .iter()
            .map(|t| match nat {
                Some(a) if a.is_ipv4() == t.is_ipv4() => a,
                _ => *t,
            })
            .chain(nat.filter(|a| transit.iter().all(|t| t.is_ipv4() != a.is_ipv4())))
            .collect();
        let chassis = self.settings.gateway_chassis_names();
        Ok(rows::virtual_network(
            v,
            &self.provider,
            &chassis,
            transit,
            &egress,
            &external_addresses(&inner.state, vn),
        ))
    }

    /// Whether external address `address` falls inside a prefix of VirtualNetwork `vn` (then
    /// its uplink guard names it as an exception and changes with it; otherwise the guard is
    /// left as it is, sparing the operation its reads).
    fn guard_covers(&self, inner: &Inner, vn: &str, address: IpAddr) -> bool {
        inner
            .state
            .vn(vn)
            .is_some_and(|v| rows::vn_prefixes(v).iter().any(|p| p.contains(&address)))
    }

    /// VirtualNetwork `vn`'s uplink guard as the model holds it (its exceptions change with
    /// the VN's external addresses).
    fn vn_guard(&self, inner: &Inner, vn: &str) -> Result<Row, OpError> {
        let v = inner.state.required_vn(vn)?;
        let own = [
            self.transit_of(inner, vn)?,
            &external_addresses(&inner.state, vn),
        ]
        .concat();
        Ok(external::uplink_guard(
            vn,
            &v.tenant,
            &rows::vn_prefixes(v),
            &own,
        ))
    }
}

/// The external addresses VirtualNetwork `vn`'s router answers for on the provider network:
/// its NAT gateway's and its ExternalIP attachments'.
fn external_addresses(state: &FabricState, vn: &str) -> Vec<IpAddr> {
    let dnat = state.records().filter_map(|r| match r {
        Record::Dnat(d) if d.virtual_network_id == vn => Some(d.external_address),
        _ => None,
    });
    state
        .nat_gateway_of(vn)
        .map(|n| n.external_address)
        .into_iter()
        .chain(dnat)
        .collect()
}

/// A converge's failure as the client's error: a row it could not write names what it misses
/// (the connection stays).
fn converge_failure(e: nb::ConvergeError) -> osac_ovsdb::Error {
    match e {
        nb::ConvergeError::Ovsdb(e) => e,
        other => osac_ovsdb::Error::Rpc {
            method: "transact".into(),
            error: other.to_string(),
            details: None,
        },
    }
}

/// How long one operation's writes may take: a member that lost its leader may hold a
/// transaction until an election ends, and a driver must not wait on it forever.
const WRITE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

/// `work`, or a disconnect (the connection is dropped and re-opened next time) when it takes
/// longer than [`WRITE_DEADLINE`].
async fn within_deadline<T>(
    work: impl std::future::Future<Output = Result<T, osac_ovsdb::Error>>,
) -> Result<T, osac_ovsdb::Error> {
    tokio::time::timeout(WRITE_DEADLINE, work)
        .await
        .unwrap_or_else(|_| {
            Err(osac_ovsdb::Error::Disconnected(format!(
                "no answer within {} s",
                WRITE_DEADLINE.as_secs()
            )))
        })
}

/// Connects to the first member of `addresses` that answers (with `tls` for `ssl:` ones).
async fn connect(addresses: &[Address], tls: Option<&Tls>) -> Result<Client, osac_ovsdb::Error> {
    let mut last = None;
    for a in addresses {
        match Client::connect_with(a, tls).await {
            Ok((client, _updates)) => return Ok(client),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| osac_ovsdb::Error::Disconnected("no address".into())))
}

/// The record an operation's first change replaces (the object a delete removes), if any.
fn replaced_record(before: &[Option<Record>]) -> Option<&Record> {
    before.first().and_then(Option::as_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(extra: &str, northbound: &str) -> OvnSettings {
        let yaml = format!(
            "northbound: {northbound}\nprovider_network: physnet\ntransit_cidr: 100.64.0.0/24\nprovider_gateway: 100.64.0.1\ngateway_chassis: [hv1]\n{extra}"
        );
        serde_yaml_ng::from_str(&yaml).unwrap()
    }

    fn tls_error(s: &OvnSettings) -> String {
        let addresses = Address::parse_list(&s.northbound).unwrap();
        match s.tls(&addresses) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn ssl_members_need_all_three_files_and_only_they_take_them() {
        let ssl = settings(
            "private_key: /k.pem\n",
            "tcp:10.0.0.1:6641,ssl:10.0.0.2:6641",
        );
        assert!(
            tls_error(&ssl).contains("needs private_key, certificate and ca_certificate"),
            "{}",
            tls_error(&ssl)
        );
        let plain = settings("certificate: /c.pem\n", "tcp:10.0.0.1:6641");
        assert!(
            tls_error(&plain).contains("none is ssl:"),
            "{}",
            tls_error(&plain)
        );
        assert_eq!(tls_error(&settings("", "unix:/nb.sock")), "");
        let missing = settings(
            "private_key: /nonexistent/k.pem\ncertificate: /nonexistent/c.pem\nca_certificate: /nonexistent/ca.pem\n",
            "ssl:10.0.0.2:6641",
        );
        assert!(
            tls_error(&missing).contains("private key /nonexistent/k.pem"),
            "{}",
            tls_error(&missing)
        );
    }

    #[test]
    fn transit_settings_fit_together() {
        let check = |extra: &str| match settings(extra, "unix:/nb.sock").provider.check() {
            Ok(()) => String::new(),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            check("transit_ipv6_cidr: fd00:64::/64\nprovider_ipv6_gateway: fd00:64::1\n"),
            ""
        );
        assert!(check("transit_ipv6_cidr: fd00:64::/64\n").contains("go together"));
        assert!(
            check("transit_ipv6_cidr: fd00:64::/64\nprovider_ipv6_gateway: fd00:65::1\n")
                .contains("not in transit_ipv6_cidr")
        );
        let v6_first: OvnSettings = serde_yaml_ng::from_str(
            "northbound: unix:/nb.sock\nprovider_network: p\ntransit_cidr: fd00:63::/64\nprovider_gateway: fd00:63::1\ntransit_ipv6_cidr: fd00:64::/64\nprovider_ipv6_gateway: fd00:64::1\ngateway_chassis: [hv1]\n",
        )
        .unwrap();
        assert!(
            v6_first
                .provider
                .check()
                .unwrap_err()
                .to_string()
                .contains("second prefix of an IPv4 transit_cidr")
        );
        let outside: OvnSettings = serde_yaml_ng::from_str(
            "northbound: unix:/nb.sock\nprovider_network: p\ntransit_cidr: 100.64.0.0/24\nprovider_gateway: 100.65.0.1\ngateway_chassis: [hv1]\n",
        )
        .unwrap();
        assert!(
            outside
                .provider
                .check()
                .unwrap_err()
                .to_string()
                .contains("not in transit_cidr")
        );
    }
}
