//! What the workload reconcilers (ComputeInstance, BareMetalInstance, Cluster) share: the
//! record being worked on, conditions, network resolution, fabric ports, DHCP discovery, host
//! reservation, the external address and phase timing. See `docs/workloads.md`.
//!
//! # How a workload reconcile runs
//!
//! Every reconcile walks the phases from the first one. A phase whose condition is TRUE *for the
//! current spec* is skipped; the others run (every manager and provisioner call is idempotent).
//! "For the current spec" is the [`APPLIED_SPEC_ANNOTATION`]: on workloads it holds the hash of
//! the spec the status and conditions describe, written with every status write. A spec change
//! (security groups of an attachment) therefore re-runs every phase once. Store-side steps
//! (host reservation, VIP allocation, final assignment) write the workload in the same
//! transaction as the hosts / under the subnet lock, so a crash between two steps leaves either
//! both or neither.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use osac_backends::{
    CreateNetworkAttachmentRequest, DeleteNetworkAttachmentRequest, FabricClient, OpError,
    PortAddresses, QueryDhcpLeaseRequest,
};
use osac_model::{FABRIC_FINALIZER, Kind, pb};
use osac_store::{ListQuery, Record, StoreError, Tx};
use serde::Serialize;

use super::backend::status_message;
use super::{
    APPLIED_SPEC_ANNOTATION, Action, Object, ReconcileCtx, ReconcileError,
    VIRTUAL_NETWORK_ANNOTATION, describe, spec_hash,
};
use crate::dispatch::Managers;
use crate::metrics;

/// Annotation of a ComputeInstance: the hosting cluster its VM runs on (chosen once).
pub const HOSTING_CLUSTER_ANNOTATION: &str = "osac.openshift.io/hosting-cluster";

/// Condition types (docs/workloads.md).
pub(crate) const INVENTORY_ASSIGNED: &str = "InventoryAssigned";
pub(crate) const NETWORKING_CONFIGURED: &str = "NetworkingConfigured";
pub(crate) const PROVISIONED: &str = "Provisioned";
pub(crate) const PROVISIONING_COMPLETE: &str = "ProvisioningComplete";
pub(crate) const IP_DISCOVERY_COMPLETE: &str = "IPDiscoveryComplete";
pub(crate) const IP_DISCOVERY_TIMEOUT: &str = "NetworkingIPDiscoveryTimeout";
pub(crate) const READY: &str = "Ready";

/// Host pools.
pub(crate) const POOL_BAREMETAL: &str = "baremetal";
pub(crate) const POOL_CAAS: &str = "caas";

/// The message of a workload waiting for a provisioner that is not configured.
pub(crate) const NO_PROVISIONER: &str =
    "waiting for a provisioner: none is configured in this deployment";

/// Current time as a proto timestamp.
pub(crate) fn now() -> pbjson_types::Timestamp {
    let t = chrono::Utc::now();
    pbjson_types::Timestamp {
        seconds: t.timestamp(),
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// The condition of `kind` in `conds`.
pub(crate) fn condition<'a>(conds: &'a [pb::Condition], kind: &str) -> Option<&'a pb::Condition> {
    conds.iter().find(|c| c.r#type == kind)
}

/// Whether the condition is TRUE.
pub(crate) fn is_true(conds: &[pb::Condition], kind: &str) -> bool {
    condition(conds, kind).is_some_and(|c| c.status == pb::ConditionStatus::True as i32)
}

/// Sets a condition; the transition time changes only when the status does.
pub(crate) fn set_condition(
    conds: &mut Vec<pb::Condition>,
    kind: &str,
    ok: bool,
    reason: &str,
    message: impl Into<String>,
) {
    let status = if ok {
        pb::ConditionStatus::True
    } else {
        pb::ConditionStatus::False
    } as i32;
    let position = conds.iter().position(|c| c.r#type == kind);
    let transition = match position.map(|i| &conds[i]) {
        Some(c) if c.status == status => c.last_transition_time,
        _ => Some(now()),
    };
    let c = pb::Condition {
        r#type: kind.to_string(),
        status,
        reason: reason.to_string(),
        message: message.into(),
        last_transition_time: transition,
    };
    match position {
        Some(i) => conds[i] = c,
        None => conds.push(c),
    }
}

/// A workload kind's proto type.
pub(crate) trait Workload: Object + Serialize {
    const KIND: Kind;
    fn conditions(&self) -> &[pb::Condition];
    fn conditions_mut(&mut self) -> &mut Vec<pb::Condition>;
}

macro_rules! workload {
    ($ty:ty, $status:ty, $kind:expr) => {
        impl crate::reconcile::workload::Workload for $ty {
            const KIND: osac_model::Kind = $kind;
            fn conditions(&self) -> &[osac_model::pb::Condition] {
                self.status
                    .as_ref()
                    .map_or(&[], |s| s.conditions.as_slice())
            }
            fn conditions_mut(&mut self) -> &mut Vec<osac_model::pb::Condition> {
                &mut self
                    .status
                    .get_or_insert_with(<$status>::default)
                    .conditions
            }
        }
    };
}
pub(crate) use workload;

/// The workload being reconciled: the stored record (follows every write), the decoded body
/// being changed, and the annotations to write with it.
pub(crate) struct Work<T> {
    pub rec: Record,
    pub obj: T,
    pub annotations: BTreeMap<String, String>,
    /// The stored conditions describe the current spec.
    fresh: bool,
}

impl<T: Workload> Work<T> {
    pub fn new(rec: Record, obj: T) -> Self {
        let fresh = rec.annotations.get(APPLIED_SPEC_ANNOTATION) == Some(&spec_hash(&rec.body));
        Work {
            annotations: rec.annotations.clone(),
            rec,
            obj,
            fresh,
        }
    }

    /// The workload's id.
    pub fn id(&self) -> &str {
        &self.rec.id
    }

    /// Whether a phase is already done for the current spec.
    pub fn done(&self, kind: &str) -> bool {
        self.fresh && is_true(self.obj.conditions(), kind)
    }

    /// Sets a condition.
    pub fn set(&mut self, kind: &str, ok: bool, reason: &str, message: impl Into<String>) {
        set_condition(self.obj.conditions_mut(), kind, ok, reason, message);
    }

    /// The record to write: body, annotations and the spec hash the status describes.
    fn next(&self) -> Result<Record, ReconcileError> {
        let mut next = self.rec.clone();
        next.encode(&self.obj)?;
        next.annotations = self.annotations.clone();
        let hash = spec_hash(&next.body);
        next.annotations
            .insert(APPLIED_SPEC_ANNOTATION.to_string(), hash);
        Ok(next)
    }

    /// Writes the workload inside `tx` when something changed; returns the written record
    /// (set it with [`Work::written`] after the commit).
    pub async fn write_in(&self, tx: &mut dyn Tx) -> Result<Option<Record>, ReconcileError> {
        let next = self.next()?;
        if next == self.rec {
            return Ok(None);
        }
        Ok(crate::events::update(tx, &self.rec, &next).await?)
    }

    /// Records a committed write.
    pub fn written(&mut self, rec: Option<Record>) {
        if let Some(r) = rec {
            self.rec = r;
            self.fresh = true;
        }
    }

    /// Writes the workload when something changed.
    pub async fn write(&mut self, ctx: &ReconcileCtx) -> Result<(), ReconcileError> {
        let started = Instant::now();
        let next = self.next()?;
        if next == self.rec {
            return Ok(());
        }
        let written = crate::events::apply_update(ctx.store.as_ref(), &self.rec, &next).await?;
        self.written(written);
        metrics::workload_phase(T::KIND.collection(), "status_write", started.elapsed());
        Ok(())
    }

    /// A phase cannot proceed yet: its condition is FALSE with `reason`, the message says
    /// why, and the runtime looks again per `action`.
    pub async fn wait(
        &mut self,
        ctx: &ReconcileCtx,
        phase: &str,
        reason: &str,
        message: String,
        action: Action,
    ) -> Result<Action, ReconcileError> {
        self.set(phase, false, reason, message.clone());
        if self.obj.state() == 0 {
            self.obj.set_state(T::PENDING);
        }
        self.obj.set_message(message);
        self.write(ctx).await?;
        Ok(action)
    }

    /// A phase step failed. Transient: condition FALSE (`Retrying`), message, back off.
    /// Permanent: FAILED with the message until the spec changes.
    pub async fn failed(
        &mut self,
        ctx: &ReconcileCtx,
        phase: &str,
        err: OpError,
    ) -> Result<Action, ReconcileError> {
        let m = status_message(ctx, &self.rec, self.obj.message(), &err).await;
        if err.is_transient() {
            return self.wait(ctx, phase, "Retrying", m, Action::Retry).await;
        }
        self.set(phase, false, "Failed", m.clone());
        self.obj.set_state(T::FAILED);
        self.obj.set_message(m);
        self.write(ctx).await?;
        Ok(Action::Done)
    }

    /// A delete step failed: DELETING (DELETE_FAILED when permanent and the kind has it) with
    /// the message; transient retries with backoff, permanent slowly.
    pub async fn delete_failed(
        &mut self,
        ctx: &ReconcileCtx,
        err: OpError,
    ) -> Result<Action, ReconcileError> {
        let (state, action) = if err.is_transient() {
            (T::DELETING, Action::Retry)
        } else {
            (
                T::DELETE_FAILED.unwrap_or(T::DELETING),
                Action::After(ctx.config.backoff_cap),
            )
        };
        let m = status_message(ctx, &self.rec, self.obj.message(), &err).await;
        self.obj.set_state(state);
        self.obj.set_message(m);
        self.write(ctx).await?;
        Ok(action)
    }
}

/// Runs one phase step and records its duration.
pub(crate) async fn timed<F: Future>(kind: Kind, phase: &'static str, f: F) -> F::Output {
    let start = Instant::now();
    let out = f.await;
    metrics::workload_phase(kind.collection(), phase, start.elapsed());
    out
}

/// How often IP discovery polls the fabric's leases.
pub(crate) fn lease_poll(ctx: &ReconcileCtx) -> Duration {
    (ctx.config.backoff_base * 2).clamp(Duration::from_millis(10), Duration::from_secs(5))
}

/// FNV-1a of a string (stable choices derived from ids).
pub(crate) fn fnv(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The deterministic MAC of a VM's NIC `n`: locally administered unicast (`02:…`).
pub fn vm_mac(instance_id: &str, n: usize) -> String {
    let b = fnv(&format!("{instance_id}/{n}")).to_be_bytes();
    format!(
        "02:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[3], b[4], b[5], b[6], b[7]
    )
}

/// The hosting cluster a VM runs on: a stable choice from its id.
pub fn hosting_cluster_for(instance_id: &str, clusters: &[String]) -> Option<String> {
    if clusters.is_empty() {
        return None;
    }
    let n = u64::try_from(clusters.len()).unwrap_or(1);
    let i = usize::try_from(fnv(instance_id) % n).unwrap_or(0);
    clusters.get(i).cloned()
}

/// The VirtualNetwork the workload's subnets are in, with its managers and the subnets.
pub(crate) struct Network {
    pub vn_id: String,
    pub managers: Managers,
    /// The subnet records, in the order asked for (deduplicated).
    pub subnets: Vec<Record>,
}

/// Outcome of a precondition check.
pub(crate) enum Resolved<T> {
    Ready(T),
    /// Not yet: the message says what the workload waits for.
    Wait(String),
    /// Cannot work (permanent) or failed this time (transient).
    Failed(OpError),
}

fn subnet_state(rec: &Record) -> Result<i32, ReconcileError> {
    let s: pb::Subnet = rec.decode()?;
    Ok(s.status.map_or(0, |s| s.state))
}

/// Checks that every subnet and security group exists, is READY and is in one VirtualNetwork,
/// and finds that network's managers.
pub(crate) async fn resolve_network(
    ctx: &ReconcileCtx,
    subnets: &[&str],
    security_groups: &[&str],
) -> Result<Resolved<Network>, ReconcileError> {
    let mut vn_id = String::new();
    let mut records = Vec::new();
    let mut seen = BTreeSet::new();
    for id in subnets {
        if !seen.insert(*id) {
            continue;
        }
        let rec = match ctx.store.get(id).await? {
            Some(r) if r.kind == Kind::Subnet && r.deleted_at.is_none() => r,
            Some(r) if r.kind == Kind::Subnet => {
                return Ok(Resolved::Wait(format!("{} is being deleted", describe(&r))));
            }
            _ => {
                return Ok(Resolved::Wait(format!(
                    "waiting for Subnet '{id}' to exist"
                )));
            }
        };
        let state = subnet_state(&rec)?;
        if state == pb::SubnetState::Failed as i32 {
            let s: pb::Subnet = rec.decode()?;
            let why = s.status.map(|s| s.message).unwrap_or_default();
            return Ok(Resolved::Failed(OpError::permanent(format!(
                "{} is FAILED: {why}",
                describe(&rec)
            ))));
        }
        if state != pb::SubnetState::Ready as i32 {
            return Ok(Resolved::Wait(format!(
                "waiting for {} to be READY",
                describe(&rec)
            )));
        }
        let vn = osac_model::refs::string_at(&rec.body, "spec.virtual_network")
            .unwrap_or_default()
            .to_string();
        if vn_id.is_empty() {
            vn_id = vn;
        } else if vn != vn_id {
            return Ok(Resolved::Failed(OpError::permanent(format!(
                "the attachments' subnets are in different VirtualNetworks ('{vn_id}' and '{vn}')"
            ))));
        }
        records.push(rec);
    }
    if vn_id.is_empty() {
        return Ok(Resolved::Failed(OpError::permanent(
            "the workload has no network attachment with a subnet",
        )));
    }
    let mut seen = BTreeSet::new();
    for id in security_groups {
        if !seen.insert(*id) {
            continue;
        }
        let rec = match ctx.store.get(id).await? {
            Some(r) if r.kind == Kind::SecurityGroup && r.deleted_at.is_none() => r,
            _ => {
                return Ok(Resolved::Wait(format!(
                    "waiting for SecurityGroup '{id}' to exist"
                )));
            }
        };
        let sg: pb::SecurityGroup = rec.decode()?;
        let sg_vn = sg.spec.as_ref().map_or("", |s| s.virtual_network.as_str());
        if sg_vn != vn_id {
            return Ok(Resolved::Failed(OpError::permanent(format!(
                "{} belongs to VirtualNetwork '{sg_vn}', not to the subnets' '{vn_id}'",
                describe(&rec)
            ))));
        }
        let state = sg.status.as_ref().map_or(0, |s| s.state);
        if state != pb::SecurityGroupState::Ready as i32 {
            return Ok(Resolved::Wait(format!(
                "waiting for {} to be READY",
                describe(&rec)
            )));
        }
    }
    match ctx
        .dispatcher
        .for_virtual_network(&*ctx.store, &vn_id)
        .await
    {
        Ok((_, managers)) => Ok(Resolved::Ready(Network {
            vn_id,
            managers,
            subnets: records,
        })),
        Err(e) => Ok(Resolved::Failed(e)),
    }
}

/// The managers to undo a workload's ports with: its VirtualNetwork's (recorded annotation,
/// else through `subnet`), the default class's when that network is gone.
pub(crate) async fn managers_for_delete(
    ctx: &ReconcileCtx,
    rec: &Record,
    subnet: &str,
) -> Result<Managers, OpError> {
    let store_err = |e: StoreError| OpError::transient(format!("store: {e}"));
    let mut vn = rec
        .annotations
        .get(VIRTUAL_NETWORK_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    if vn.is_empty()
        && !subnet.is_empty()
        && let Some(s) = ctx.store.get(subnet).await.map_err(store_err)?
    {
        vn = osac_model::refs::string_at(&s.body, "spec.virtual_network")
            .unwrap_or_default()
            .to_string();
    }
    if !vn.is_empty()
        && ctx
            .store
            .get(&vn)
            .await
            .map_err(store_err)?
            .is_some_and(|r| r.kind == Kind::VirtualNetwork)
    {
        return Ok(ctx
            .dispatcher
            .for_virtual_network(&*ctx.store, &vn)
            .await?
            .1);
    }
    ctx.dispatcher.for_default_class(&*ctx.store).await
}

/// One fabric port of a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Port {
    pub attachment_id: String,
    pub host: String,
    pub interface: String,
    pub mac_address: String,
    pub subnet_id: String,
    pub security_groups: Vec<String>,
    pub primary: bool,
}

/// `create_network_attachment` for every port (moves parked ports onto the subnet; updates
/// security groups of existing ones). VMs and bare-metal servers use no extra addresses.
pub(crate) async fn attach_ports(
    fabric: &FabricClient,
    vn_id: &str,
    ports: &[Port],
) -> Result<(), OpError> {
    attach_ports_allowing(fabric, vn_id, ports, &[]).await
}

/// [`attach_ports`] where every port may also send from `allowed` (a cluster's VIPs, which its
/// agents answer for). The list replaces the one the fabric had, so callers always pass the
/// complete set.
pub(crate) async fn attach_ports_allowing(
    fabric: &FabricClient,
    vn_id: &str,
    ports: &[Port],
    allowed: &[IpAddr],
) -> Result<(), OpError> {
    for p in ports {
        fabric
            .create_network_attachment(&CreateNetworkAttachmentRequest {
                attachment_id: p.attachment_id.clone(),
                host: p.host.clone(),
                interface: p.interface.clone(),
                mac_address: p.mac_address.clone(),
                subnet_id: p.subnet_id.clone(),
                virtual_network_id: vn_id.to_string(),
                security_groups: p.security_groups.clone(),
                primary: p.primary,
                allowed_addresses: allowed.to_vec(),
            })
            .await
            .map_err(|e| on_port(p, e))?;
    }
    Ok(())
}

/// `delete_network_attachment` for every port; `park` moves them to the parking network.
pub(crate) async fn detach_ports(
    fabric: &FabricClient,
    ports: &[Port],
    park: bool,
) -> Result<(), OpError> {
    for p in ports {
        fabric
            .delete_network_attachment(&DeleteNetworkAttachmentRequest {
                attachment_id: p.attachment_id.clone(),
                host: p.host.clone(),
                interface: p.interface.clone(),
                mac_address: p.mac_address.clone(),
                subnet_id: p.subnet_id.clone(),
                park,
            })
            .await
            .map_err(|e| on_port(p, e))?;
    }
    Ok(())
}

/// `query_dhcp_lease` for every port, in order (empty = no lease yet).
pub(crate) async fn discover(
    fabric: &FabricClient,
    ports: &[Port],
) -> Result<Vec<PortAddresses>, OpError> {
    let mut out = Vec::with_capacity(ports.len());
    for p in ports {
        let lease = fabric
            .query_dhcp_lease(&QueryDhcpLeaseRequest {
                subnet_id: p.subnet_id.clone(),
                mac_address: p.mac_address.clone(),
            })
            .await
            .map_err(|e| on_port(p, e))?;
        out.push(lease);
    }
    Ok(out)
}

/// The address families a port's subnet serves: discovery waits for each of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Families {
    pub v4: bool,
    pub v6: bool,
}

/// How long discovery waits for a dual-stack port's second family once the first is leased
/// (a provider whose DHCP serves only one family must not keep workloads from READY; ours
/// hands out IPv6 a second or two after IPv4, after the first router advertisement).
pub(crate) const SECOND_FAMILY_GRACE: Duration = Duration::from_secs(30);

/// The families of each port's subnet (both when the subnet is unknown or undecodable, so the
/// grace applies rather than a wrong answer).
pub(crate) fn wanted_families(ports: &[Port], subnets: &[Record]) -> Vec<Families> {
    ports
        .iter()
        .map(|p| {
            let spec = subnets
                .iter()
                .find(|r| r.id == p.subnet_id)
                .and_then(|r| r.decode::<pb::Subnet>().ok())
                .and_then(|s| s.spec);
            spec.map_or(Families { v4: true, v6: true }, |s| Families {
                v4: !s.ipv4_cidr.is_empty(),
                v6: !s.ipv6_cidr.is_empty(),
            })
        })
        .collect()
}

/// How long ago condition `kind` last changed (zero when unknown): the start of a wait.
pub(crate) fn since_condition(conds: &[pb::Condition], kind: &str) -> Duration {
    condition(conds, kind)
        .and_then(|c| c.last_transition_time)
        .and_then(|t| chrono::DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?))
        .and_then(|t| (chrono::Utc::now() - t).to_std().ok())
        .unwrap_or_default()
}

/// "interface eth0 (02:…)" for each port still waiting: without any lease, or without a family
/// its subnet serves unless `partial_ok` (the second family's grace is over).
pub(crate) fn describe_missing(
    ports: &[Port],
    leases: &[PortAddresses],
    wanted: &[Families],
    partial_ok: bool,
) -> Vec<String> {
    ports
        .iter()
        .zip(leases)
        .zip(
            wanted
                .iter()
                .chain(std::iter::repeat(&Families { v4: true, v6: true })),
        )
        .filter_map(|((p, l), f)| {
            // VM ports are named `<vm id>/eth<n>` on the fabric: show the NIC.
            let nic = p.interface.rsplit('/').next().unwrap_or(&p.interface);
            if l.is_empty() {
                return Some(format!("{nic} ({})", p.mac_address));
            }
            let lacks_v4 = f.v4 && l.ipv4_address.is_none();
            let lacks_v6 = f.v6 && l.ipv6_address.is_none();
            match (partial_ok, lacks_v4, lacks_v6) {
                (false, true, _) => Some(format!("{nic} ({}) IPv4", p.mac_address)),
                (false, _, true) => Some(format!("{nic} ({}) IPv6", p.mac_address)),
                _ => None,
            }
        })
        .collect()
}

/// Prefixes a port failure with the port, keeping its kind.
fn on_port(p: &Port, e: OpError) -> OpError {
    e.map_message(|m| format!("port {} ({}): {m}", p.interface, p.attachment_id))
}

/// The address strings of a lease: (IPv4 or "", IPv6 or "").
pub(crate) fn lease_strings(l: &PortAddresses) -> (String, String) {
    let s = |a: Option<IpAddr>| a.map(|a| a.to_string()).unwrap_or_default();
    (s(l.ipv4_address), s(l.ipv6_address))
}

/// The primary address of a lease: IPv4, else IPv6.
pub(crate) fn lease_primary(l: &PortAddresses) -> String {
    l.ipv4_address
        .or(l.ipv6_address)
        .map(|a| a.to_string())
        .unwrap_or_default()
}

/// The address of the READY ExternalIPAttachment targeting the workload through `field`
/// (`spec.compute_instance` / `spec.baremetal_instance`); "" when none.
pub(crate) async fn external_ip_of(
    ctx: &ReconcileCtx,
    workload_id: &str,
    field: &str,
) -> Result<String, ReconcileError> {
    let mut found: Vec<(String, String)> = Vec::new();
    for r in ctx.store.referrers(workload_id).await? {
        if r.source_kind != Kind::ExternalIpAttachment || r.field != field {
            continue;
        }
        let Some(rec) = ctx.store.get(&r.source).await? else {
            continue;
        };
        if rec.deleted_at.is_some() {
            continue;
        }
        let att: pb::ExternalIpAttachment = rec.decode()?;
        let Some(status) = att.status else { continue };
        if status.state == pb::ExternalIpAttachmentState::Ready as i32
            && !status.external_ip_address.is_empty()
        {
            found.push((rec.id.clone(), status.external_ip_address));
        }
    }
    found.sort();
    Ok(found.into_iter().next().map(|(_, a)| a).unwrap_or_default())
}

// ---- hosts ----

fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// FREE hosts of a type and pool, in name order (inside `tx`).
pub(crate) async fn free_hosts(
    tx: &mut dyn Tx,
    host_type: &str,
    pool: &str,
) -> Result<Vec<Record>, StoreError> {
    let filter = format!(
        "this.spec.host_type == {} && this.spec.pool == {} && this.status.state == \"HOST_STATE_FREE\"",
        quoted(host_type),
        quoted(pool)
    );
    let page = tx
        .list(&ListQuery {
            kind: Kind::Host,
            tenant: None,
            filter,
            order: "metadata.name".to_string(),
            offset: 0,
            limit: 1000,
        })
        .await?;
    Ok(page.items)
}

/// The host's state and owner.
pub(crate) fn host_state(host: &pb::Host) -> (i32, &str) {
    host.status
        .as_ref()
        .map_or((0, ""), |s| (s.state, s.assigned_to.as_str()))
}

/// Whether the host record is (still) reserved or assigned to `owner`.
pub(crate) fn owned_by(rec: &Record, owner: &str) -> Result<bool, StoreError> {
    if rec.kind != Kind::Host || rec.deleted_at.is_some() {
        return Ok(false);
    }
    let h: pb::Host = rec.decode()?;
    let (state, who) = host_state(&h);
    Ok(who == owner
        && (state == pb::HostState::Reserved as i32 || state == pb::HostState::Assigned as i32))
}

/// The RESERVED version of a locked host record when it is FREE, of `host_type` and `pool`
/// (None otherwise). Drops the parking mark: the port is about to leave the parking network.
pub(crate) fn reserve(
    rec: &Record,
    host_type: &str,
    pool: &str,
    owner: &str,
) -> Result<Option<Record>, StoreError> {
    if rec.kind != Kind::Host || rec.deleted_at.is_some() {
        return Ok(None);
    }
    let mut h: pb::Host = rec.decode()?;
    let spec = h.spec.clone().unwrap_or_default();
    if spec.host_type != host_type
        || spec.pool != pool
        || host_state(&h).0 != pb::HostState::Free as i32
    {
        return Ok(None);
    }
    let status = h.status.get_or_insert_with(Default::default);
    status.state = pb::HostState::Reserved as i32;
    status.assigned_to = owner.to_string();
    status.message = String::new();
    let mut next = rec.clone();
    next.encode(&h)?;
    next.annotations.remove(super::host::PARKED_ANNOTATION);
    Ok(Some(next))
}

/// Locks host `id` in `tx` and moves it to `state` if `owner` holds it (FREE clears the
/// owner). Returns whether it was written.
pub(crate) async fn set_host_state(
    tx: &mut dyn Tx,
    id: &str,
    owner: &str,
    state: pb::HostState,
) -> Result<bool, StoreError> {
    let Some(rec) = tx.lock(id).await? else {
        return Ok(false);
    };
    if !owned_by(&rec, owner)? {
        return Ok(false);
    }
    let mut h: pb::Host = rec.decode()?;
    let status = h.status.get_or_insert_with(Default::default);
    if status.state == state as i32 {
        return Ok(false);
    }
    status.state = state as i32;
    if state == pb::HostState::Free {
        status.assigned_to = String::new();
    }
    status.message = String::new();
    let mut next = rec.clone();
    next.encode(&h)?;
    tx.update(&next).await?;
    Ok(true)
}

/// The MAC address of a host's interface.
pub(crate) fn host_mac(host: &pb::Host, interface: &str) -> Option<String> {
    host.spec.as_ref().and_then(|s| {
        s.interfaces
            .iter()
            .find(|i| i.name == interface)
            .map(|i| i.mac_address.clone())
    })
}

/// "HostType 'name'" (or its id when it is gone), for messages.
pub(crate) async fn host_type_label(
    ctx: &ReconcileCtx,
    id: &str,
) -> Result<String, ReconcileError> {
    Ok(match ctx.store.get(id).await? {
        Some(r) => describe(&r),
        None => format!("HostType '{id}'"),
    })
}

/// The undo is complete: frees the workload's hosts and drops its finalizer in one
/// transaction (the row goes when no finalizer is left).
pub(crate) async fn finalize_with_hosts(
    ctx: &ReconcileCtx,
    rec: &Record,
    hosts: &[String],
) -> Result<Action, ReconcileError> {
    let start = Instant::now();
    let mut tx = ctx.store.begin().await?;
    for h in hosts {
        set_host_state(&mut *tx, h, &rec.id, pb::HostState::Free).await?;
    }
    let mut next = rec.clone();
    next.finalizers.retain(|f| f != FABRIC_FINALIZER);
    if next != *rec {
        crate::events::update(&mut *tx, rec, &next).await?;
    }
    tx.commit().await?;
    metrics::workload_phase(rec.kind.collection(), "release_hosts", start.elapsed());
    Ok(Action::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_macs_are_stable_local_and_distinct() {
        let a = vm_mac("0190-abc", 0);
        assert_eq!(a, vm_mac("0190-abc", 0));
        assert!(a.starts_with("02:"));
        assert_eq!(a.len(), 17);
        assert_ne!(a, vm_mac("0190-abc", 1));
        assert_ne!(a, vm_mac("0190-abd", 0));
    }

    #[test]
    fn discovery_waits_for_every_family_of_the_subnet_until_the_grace_is_over() {
        let port = Port {
            attachment_id: "vm/0".into(),
            host: "hc".into(),
            interface: "vm/eth0".into(),
            mac_address: "02:00:00:00:00:01".into(),
            subnet_id: "s".into(),
            security_groups: vec![],
            primary: true,
        };
        let ports = [port];
        let v4_only = [PortAddresses {
            ipv4_address: Some("10.0.0.5".parse().unwrap()),
            ipv6_address: None,
        }];
        let dual = [Families { v4: true, v6: true }];
        let single = [Families {
            v4: true,
            v6: false,
        }];
        assert_eq!(
            describe_missing(&ports, &v4_only, &dual, false),
            vec!["eth0 (02:00:00:00:00:01) IPv6".to_string()]
        );
        assert!(describe_missing(&ports, &v4_only, &dual, true).is_empty());
        assert!(describe_missing(&ports, &v4_only, &single, false).is_empty());
        let none = [PortAddresses::default()];
        assert_eq!(describe_missing(&ports, &none, &single, true).len(), 1);
    }

    #[test]
    fn hosting_cluster_choice_is_stable() {
        let clusters = vec!["a".to_string(), "b".to_string()];
        let c = hosting_cluster_for("x", &clusters);
        assert_eq!(c, hosting_cluster_for("x", &clusters));
        assert!(c.is_some());
        assert_eq!(hosting_cluster_for("x", &[]), None);
        let spread: BTreeSet<String> = (0..32)
            .filter_map(|i| hosting_cluster_for(&format!("vm-{i}"), &clusters))
            .collect();
        assert_eq!(spread.len(), 2, "ids spread over the clusters");
    }

    #[test]
    fn conditions_keep_transition_time_while_status_holds() {
        let mut conds = Vec::new();
        set_condition(&mut conds, "A", false, "Wait", "w");
        let t0 = conds[0].last_transition_time;
        set_condition(&mut conds, "A", false, "Wait", "again");
        assert_eq!(conds[0].last_transition_time, t0);
        assert_eq!(conds[0].message, "again");
        set_condition(&mut conds, "A", true, "Done", "");
        assert!(is_true(&conds, "A"));
        assert_eq!(conds.len(), 1);
    }
}
