//! Cluster: PROGRESSING → InventoryAssigned (`size` FREE `caas` hosts per node set, all
//! reserved in one transaction with `status.node_sets`) → NetworkingConfigured (each agent's
//! fabric port moved from the parking network to the subnet) → IPDiscoveryComplete (agent
//! leases; `NetworkingIPDiscoveryTimeout` after the configured timeout, retries continue) →
//! VIPs (API and ingress: the lowest free usable addresses of the subnet's `status.vip_cidr`
//! not used by another cluster, allocated under the subnet row lock; the agents' ports are
//! then allowed to send from them: `allowed_addresses`) → ProvisioningComplete
//! (`provision_cluster`, which needs the VIPs) → READY with the hosts ASSIGNED in one
//! transaction. Deletion: `deprovision_cluster`, VIPs released, ports back to parking, hosts
//! FREE with the finalizer removal.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::time::Instant;

use ipnet::IpNet;
use osac_backends::OpError;
use osac_backends::provision::{ClusterAgent, ProvisionClusterRequest};
use osac_model::{Kind, pb};
use osac_store::Record;

use super::finalizer::{self, Cleanup};
use super::host::{
    POOL_CAAS, free_hosts, host_mac, host_type_label, owned_by, reserve, set_host_state,
};
use super::network_phase::{
    self, Awaited, Port, detach_ports, lease_primary, lease_strings, managers_for_delete,
};
use super::workload::{
    INVENTORY_ASSIGNED, NETWORKING_CONFIGURED, PROVISIONING_COMPLETE, Step, Work, deprovision,
    external_ip_of, outcome, provisioner, release_with_hosts, stop, timed,
};
use super::{Action, ReconcileCtx, ReconcileError, decode, describe, settled};

super::object!(pb::Cluster, pb::ClusterStatus,
    pending: pb::ClusterState::Progressing, ready: pb::ClusterState::Ready,
    failed: pb::ClusterState::Failed, deleting: pb::ClusterState::Deleting,
    delete_failed: Some(pb::ClusterState::DeleteFailed as i32));
super::workload::workload!(pb::Cluster, pb::ClusterStatus, Kind::Cluster);

const KIND: Kind = Kind::Cluster;

/// One reserved agent.
#[derive(Debug, Clone)]
struct Agent {
    node_set: String,
    host_id: String,
    interface: String,
    mac: String,
}

/// The fabric attachment id of an agent's port.
pub fn agent_attachment_id(cluster_id: &str, host_id: &str) -> String {
    format!("{cluster_id}/{host_id}")
}

fn agent_port(cluster_id: &str, a: &Agent, subnet: &str, sgs: &[String]) -> Port {
    Port {
        attachment_id: agent_attachment_id(cluster_id, &a.host_id),
        host: a.host_id.clone(),
        interface: a.interface.clone(),
        mac_address: a.mac.clone(),
        subnet_id: subnet.to_string(),
        security_groups: sgs.to_vec(),
        primary: true,
    }
}

/// The API and ingress VIPs recorded in the status (none before they are allocated): the
/// addresses the agents' ports may send from besides their own.
fn recorded_vips(c: &pb::Cluster) -> Vec<IpAddr> {
    c.status
        .as_ref()
        .map(|s| {
            [&s.api_endpoint, &s.ingress_endpoint]
                .into_iter()
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The node sets of the spec, in name order.
fn node_sets(spec: &pb::ClusterSpec) -> BTreeMap<&str, &pb::ClusterNodeSet> {
    spec.node_sets
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect()
}

/// The agents recorded in the status, in node-set name order.
fn recorded_agents(c: &pb::Cluster) -> Vec<(String, pb::ClusterAgent)> {
    let Some(status) = c.status.as_ref() else {
        return Vec::new();
    };
    let sorted: BTreeMap<&String, &pb::ClusterNodeSetStatus> = status.node_sets.iter().collect();
    sorted
        .into_iter()
        .flat_map(|(name, ns)| ns.agents.iter().map(move |a| (name.clone(), a.clone())))
        .collect()
}

/// An agent from its host record (the MAC of the node set's fabric interface).
fn agent_of(node_set: &str, ns: &pb::ClusterNodeSet, host: &Record) -> Result<Agent, OpError> {
    let h: pb::Host = host
        .decode()
        .map_err(|e| OpError::permanent(e.to_string()))?;
    if ns.fabric_interface.is_empty() {
        return Err(OpError::permanent(format!(
            "node set '{node_set}' has no fabric_interface"
        )));
    }
    let mac = host_mac(&h, &ns.fabric_interface).ok_or_else(|| {
        OpError::permanent(format!(
            "{} has no interface '{}' in its inventory",
            describe(host),
            ns.fabric_interface
        ))
    })?;
    Ok(Agent {
        node_set: node_set.to_string(),
        host_id: host.id.clone(),
        interface: ns.fabric_interface.clone(),
        mac,
    })
}

/// Outcome of the inventory phase.
enum Inventory {
    Agents(Vec<Agent>),
    NoFreeHost(String),
    Failed(OpError),
}

/// The recorded agents when every node set has its `size` hosts still held by the cluster.
async fn recorded_if_complete(
    ctx: &ReconcileCtx,
    w: &Work<pb::Cluster>,
    spec: &pb::ClusterSpec,
) -> Result<Option<Result<Vec<Agent>, OpError>>, ReconcileError> {
    let recorded = recorded_agents(&w.obj);
    let sets = node_sets(spec);
    let mut out = Vec::new();
    for (name, ns) in &sets {
        let mine: Vec<&pb::ClusterAgent> = recorded
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, a)| a)
            .collect();
        if mine.len() != usize::try_from(ns.size).unwrap_or(0) {
            return Ok(None);
        }
        for a in mine {
            let Some(h) = ctx.store.get(&a.host).await? else {
                return Ok(None);
            };
            if !owned_by(&h, w.id())? {
                return Ok(None);
            }
            match agent_of(name, ns, &h) {
                Ok(agent) => out.push(agent),
                Err(e) => return Ok(Some(Err(e))),
            }
        }
    }
    if recorded.iter().any(|(n, _)| !sets.contains_key(n.as_str())) {
        return Ok(None);
    }
    Ok(Some(Ok(out)))
}

/// The cluster's agents: the recorded ones, else reserved now — every node set at once, in
/// one transaction that also records them (all or nothing).
async fn ensure_agents(
    ctx: &ReconcileCtx,
    w: &mut Work<pb::Cluster>,
    spec: &pb::ClusterSpec,
) -> Result<Inventory, ReconcileError> {
    match recorded_if_complete(ctx, w, spec).await? {
        Some(Ok(agents)) => return Ok(Inventory::Agents(agents)),
        Some(Err(e)) => return Ok(Inventory::Failed(e)),
        None => {}
    }
    let started = Instant::now();
    let recorded = recorded_agents(&w.obj);
    let me = w.id().to_string();
    let mut tx = ctx.store.begin_shared().await?;
    let mut picked: BTreeSet<String> = BTreeSet::new();
    let mut kept: Vec<(String, Record)> = Vec::new();
    let mut short = Vec::new();
    for (name, ns) in node_sets(spec) {
        let size = usize::try_from(ns.size).unwrap_or(0);
        let mut hosts: Vec<Record> = Vec::new();
        for (_, a) in recorded.iter().filter(|(n, _)| n == name) {
            if hosts.len() < size
                && !picked.contains(&a.host)
                && let Some(cur) = tx.lock(&a.host).await?
                && owned_by(&cur, &me)?
            {
                picked.insert(cur.id.clone());
                hosts.push(cur);
            }
        }
        if hosts.len() < size {
            for candidate in free_hosts(&mut *tx, &ns.host_type, POOL_CAAS).await? {
                if hosts.len() == size {
                    break;
                }
                if picked.contains(&candidate.id) {
                    continue;
                }
                let Some(current) = tx.lock(&candidate.id).await? else {
                    continue;
                };
                if let Some(next) = reserve(&current, &ns.host_type, POOL_CAAS, &me)?
                    && let Some(written) = tx.update(&next).await?
                {
                    picked.insert(written.id.clone());
                    hosts.push(written);
                }
            }
        }
        if hosts.len() < size {
            short.push((name.to_string(), ns.host_type.clone(), size, hosts.len()));
        }
        kept.extend(hosts.into_iter().map(|h| (name.to_string(), h)));
    }
    if !short.is_empty() {
        drop(tx);
        let mut parts = Vec::new();
        for (name, host_type, size, got) in short {
            let what = host_type_label(ctx, &host_type).await?;
            parts.push(format!(
                "node set '{name}' needs {size} FREE caas host(s) of {what}, {got} available"
            ));
        }
        return Ok(Inventory::NoFreeHost(format!(
            "{}; waiting for hosts",
            parts.join("; ")
        )));
    }
    // Recorded hosts the node sets no longer need go back to the pool.
    for (_, a) in &recorded {
        if !picked.contains(&a.host) {
            set_host_state(&mut *tx, &a.host, &me, pb::HostState::Free).await?;
        }
    }
    let sets = node_sets(spec);
    let mut agents = Vec::new();
    let mut status_sets: HashMap<String, pb::ClusterNodeSetStatus> = HashMap::new();
    for (name, host) in &kept {
        let Some(ns) = sets.get(name.as_str()) else {
            continue;
        };
        let agent = match agent_of(name, ns, host) {
            Ok(a) => a,
            Err(e) => {
                drop(tx);
                return Ok(Inventory::Failed(e));
            }
        };
        status_sets
            .entry(name.clone())
            .or_default()
            .agents
            .push(pb::ClusterAgent {
                host: agent.host_id.clone(),
                ip_address: String::new(),
                ipv6_address: String::new(),
                mac_address: agent.mac.clone(),
            });
        agents.push(agent);
    }
    let summary: Vec<String> = sets
        .iter()
        .map(|(name, ns)| format!("{name}: {}", ns.size))
        .collect();
    w.obj.status.get_or_insert_with(Default::default).node_sets = status_sets;
    w.set(
        INVENTORY_ASSIGNED,
        true,
        "HostsReserved",
        format!("caas hosts reserved ({})", summary.join(", ")),
    );
    w.commit_in(tx, "inventory", started).await?;
    Ok(Inventory::Agents(agents))
}

/// Outcome of the VIP allocation.
enum Vips {
    Allocated(String, String),
    Exhausted(String),
    Failed(OpError),
}

/// The cluster's API and ingress VIPs: the recorded ones, else the lowest two free usable
/// addresses of the subnet's VIP block, allocated under the subnet row lock and recorded in
/// the same transaction.
async fn ensure_vips(
    ctx: &ReconcileCtx,
    w: &mut Work<pb::Cluster>,
    subnet: &Record,
) -> Result<Vips, ReconcileError> {
    let status = w.obj.status.clone().unwrap_or_default();
    if !status.api_endpoint.is_empty() && !status.ingress_endpoint.is_empty() {
        return Ok(Vips::Allocated(
            status.api_endpoint,
            status.ingress_endpoint,
        ));
    }
    let s: pb::Subnet = decode(subnet)?;
    let vip_cidr = s.status.map(|s| s.vip_cidr).unwrap_or_default();
    let Ok(block) = vip_cidr.parse::<IpNet>() else {
        return Ok(Vips::Failed(OpError::permanent(format!(
            "{} has no VIP block (status.vip_cidr is empty): clusters need an IPv4 subnet of a \
             NetworkClass with a k8s manager",
            describe(subnet)
        ))));
    };
    let started = Instant::now();
    let mut tx = ctx.store.begin_shared().await?;
    tx.lock(&subnet.id).await?;
    let mut used: BTreeSet<IpAddr> = BTreeSet::new();
    let mut others = BTreeSet::new();
    for r in tx.referrers(&subnet.id).await? {
        if r.source_kind != Kind::Cluster || r.source == w.id() || !others.insert(r.source.clone())
        {
            continue;
        }
        let Some(other) = tx.get(&r.source).await? else {
            continue;
        };
        let c: pb::Cluster = decode(&other)?;
        if let Some(st) = c.status {
            used.extend(st.api_endpoint.parse::<IpAddr>().ok());
            used.extend(st.ingress_endpoint.parse::<IpAddr>().ok());
        }
    }
    let mut pick = |current: &str| -> Option<IpAddr> {
        let keep = current
            .parse::<IpAddr>()
            .ok()
            .filter(|a| block.contains(a) && !used.contains(a));
        let a =
            keep.or_else(|| osac_backends::net::lowest_free(block, &|a| used.contains(a), &[]))?;
        used.insert(a);
        Some(a)
    };
    let (Some(api), Some(ingress)) = (pick(&status.api_endpoint), pick(&status.ingress_endpoint))
    else {
        drop(tx);
        return Ok(Vips::Exhausted(format!(
            "no two free VIPs left in {vip_cidr} of {}; waiting for another cluster to release \
             its VIPs",
            describe(subnet)
        )));
    };
    let st = w.obj.status.get_or_insert_with(Default::default);
    st.api_endpoint = api.to_string();
    st.ingress_endpoint = ingress.to_string();
    let found = format!("API VIP {api}, ingress VIP {ingress} (from {vip_cidr})");
    w.note("VIPsDiscovered", false, found);
    w.commit_in(tx, "vips", started).await?;
    Ok(Vips::Allocated(api.to_string(), ingress.to_string()))
}

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    finalizer::reconcile(ctx, rec, |rec| apply(ctx, rec), |rec| cleanup(ctx, rec)).await
}

/// The reference field of ExternalIPAttachments targeting a cluster.
const TARGET_FIELD: &str = "spec.cluster";

/// Sets `status.external_ip_address` and `status.ingress_external_ip_address`: the addresses
/// of the READY ExternalIPAttachments to the cluster's API and ingress endpoints ("" if none);
/// then the URLs and DNS records under the tenant's domain (`cluster_urls`).
async fn set_external_ips(
    ctx: &ReconcileCtx,
    w: &mut Work<pb::Cluster>,
) -> Result<(), ReconcileError> {
    let id = w.id().to_string();
    let api = Some(pb::ExternalIpAttachmentEndpoint::Api);
    let api = external_ip_of(ctx, &id, TARGET_FIELD, api).await?;
    let ingress = Some(pb::ExternalIpAttachmentEndpoint::Ingress);
    let ingress = external_ip_of(ctx, &id, TARGET_FIELD, ingress).await?;
    let (tenant, name) = (w.rec.tenant.clone(), w.rec.name.clone().unwrap_or_default());
    let status = w.obj.status.get_or_insert_with(Default::default);
    status.external_ip_address = api;
    status.ingress_external_ip_address = ingress;
    super::cluster_urls::set_urls(&*ctx.store, &tenant, &name, status).await?;
    Ok(())
}

async fn apply(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let cluster: pb::Cluster = decode(&rec)?;
    let mut w = Work::new(rec, cluster);
    if settled(&w.rec, &w.obj) {
        // Converged: only the external addresses (from ExternalIPAttachments) may change.
        set_external_ips(ctx, &mut w).await?;
        w.write(ctx).await?;
        return Ok(Action::Done);
    }
    outcome(phases(ctx, &mut w).await)
}

/// Network, hosts, agent ports, addresses, VIPs, installation, READY with the hosts ASSIGNED.
async fn phases(ctx: &ReconcileCtx, w: &mut Work<pb::Cluster>) -> Step<()> {
    let spec = w.obj.spec.clone().unwrap_or_default();
    let attachment = spec.network_attachment.clone().unwrap_or_default();
    if attachment.subnet.is_empty() || spec.node_sets.is_empty() {
        let e = OpError::permanent(
            "a cluster needs spec.network_attachment.subnet and at least one node set",
        );
        return stop(w.failed(ctx, NETWORKING_CONFIGURED, e).await);
    }
    let only = [(
        attachment.subnet.as_str(),
        attachment.security_groups.as_slice(),
    )];
    let net = network_phase::resolve(ctx, w, &only).await?;
    let Some(subnet) = net.subnets.first().cloned() else {
        let e = OpError::permanent("the cluster's subnet could not be resolved");
        return stop(w.failed(ctx, NETWORKING_CONFIGURED, e).await);
    };

    let agents = match ensure_agents(ctx, w, &spec).await? {
        Inventory::Agents(a) => a,
        Inventory::NoFreeHost(m) => {
            let retry = Action::Retry;
            return stop(
                w.wait(ctx, INVENTORY_ASSIGNED, "NoFreeHost", m, retry)
                    .await,
            );
        }
        Inventory::Failed(e) => return stop(w.failed(ctx, INVENTORY_ASSIGNED, e).await),
    };
    let ports: Vec<Port> = agents
        .iter()
        .map(|a| agent_port(w.id(), a, &attachment.subnet, &attachment.security_groups))
        .collect();

    let summary = format!(
        "{} agent port(s) moved from the parking network to {}",
        ports.len(),
        describe(&subnet)
    );
    // Known VIPs go along, so re-running this step never withdraws them.
    let vips = recorded_vips(&w.obj);
    network_phase::attach(ctx, w, &net, &ports, &vips, summary).await?;

    let awaited = Awaited::Agents(ctx.ip_discovery_timeout);
    let leases = network_phase::discover(ctx, w, &net, &ports, awaited).await?;
    let status = w.obj.status.get_or_insert_with(Default::default);
    for (agent, lease) in agents.iter().zip(&leases) {
        let (v4, v6) = lease_strings(lease);
        if let Some(ns) = status.node_sets.get_mut(&agent.node_set)
            && let Some(a) = ns.agents.iter_mut().find(|a| a.host == agent.host_id)
        {
            a.ip_address = v4;
            a.ipv6_address = v6;
        }
    }

    let (api_vip, ingress_vip) = match ensure_vips(ctx, w, &subnet).await? {
        Vips::Allocated(a, i) => (a, i),
        Vips::Exhausted(m) => {
            let retry = Action::Retry;
            return stop(
                w.wait(ctx, PROVISIONING_COMPLETE, "NoFreeVIP", m, retry)
                    .await,
            );
        }
        Vips::Failed(e) => return stop(w.failed(ctx, PROVISIONING_COMPLETE, e).await),
    };
    // The agents answer for the VIPs: their ports may send from them and traffic to them is
    // filtered by the cluster's groups. Re-applied (one idempotent call per agent, no store
    // write) whenever provisioning is still to do, i.e. before the VIPs come up.
    if !w.done(PROVISIONING_COMPLETE) {
        let vips = recorded_vips(&w.obj);
        let allowed = timed(
            KIND,
            "vips_allowed",
            network_phase::attach_ports(&net.managers.fabric, &net.vn_id, &ports, &vips),
        )
        .await;
        if let Err(e) = allowed {
            return stop(w.failed(ctx, NETWORKING_CONFIGURED, e).await);
        }

        let provisioner = provisioner(ctx, w, PROVISIONING_COMPLETE).await?;
        let request = ProvisionClusterRequest {
            cluster_id: w.id().to_string(),
            template: spec.template.clone(),
            agents: agents
                .iter()
                .zip(&leases)
                .map(|(a, l)| ClusterAgent {
                    host_id: a.host_id.clone(),
                    node_set: a.node_set.clone(),
                    mac_address: a.mac.clone(),
                    ip_address: lease_primary(l),
                })
                .collect(),
            api_vip,
            ingress_vip,
        };
        let provisioned = timed(
            KIND,
            "provisioning",
            provisioner.provision_cluster(&request),
        )
        .await;
        if let Err(e) = provisioned {
            return stop(w.failed(ctx, PROVISIONING_COMPLETE, e).await);
        }
        let m = format!("cluster installed on {} agent(s)", agents.len());
        w.set(PROVISIONING_COMPLETE, true, "Provisioned", m);
    }

    set_external_ips(ctx, w).await?;
    let hosts: Vec<&str> = agents.iter().map(|a| a.host_id.as_str()).collect();
    w.ready_with_hosts(ctx, &hosts).await?;
    Ok(())
}

/// `deprovision_cluster`, VIPs released, ports back to parking, hosts FREE and finalizer gone.
async fn cleanup(ctx: &ReconcileCtx, rec: Record) -> Result<Cleanup, ReconcileError> {
    let cluster: pb::Cluster = decode(&rec)?;
    let mut w = Work::new(rec, cluster);
    let spec = w.obj.spec.clone().unwrap_or_default();
    let id = w.id().to_string();
    let torn_down = deprovision(
        ctx,
        &mut w,
        PROVISIONING_COMPLETE,
        "tear the cluster down",
        |p| async move { p.deprovision_cluster(&id).await },
    );
    if let Some(not_yet) = torn_down.await? {
        return Ok(not_yet);
    }
    let status = w.obj.status.get_or_insert_with(Default::default);
    if !status.api_endpoint.is_empty() || !status.ingress_endpoint.is_empty() {
        status.api_endpoint.clear();
        status.ingress_endpoint.clear();
        w.write(ctx).await?;
    }
    let attachment = spec.network_attachment.clone().unwrap_or_default();
    let sets = node_sets(&spec);
    let recorded = recorded_agents(&w.obj);
    let hosts: Vec<String> = recorded.iter().map(|(_, a)| a.host.clone()).collect();
    if !recorded.is_empty() {
        let ports: Vec<Port> = recorded
            .iter()
            .map(|(name, a)| {
                let interface = sets
                    .get(name.as_str())
                    .map(|ns| ns.fabric_interface.clone())
                    .unwrap_or_default();
                let agent = Agent {
                    node_set: name.clone(),
                    host_id: a.host.clone(),
                    interface,
                    mac: a.mac_address.clone(),
                };
                agent_port(&w.rec.id, &agent, &attachment.subnet, &[])
            })
            .collect();
        let parked = async {
            let managers = managers_for_delete(ctx, &w.rec, &attachment.subnet).await?;
            timed(KIND, "detach", detach_ports(&managers.fabric, &ports, true)).await
        }
        .await;
        if let Err(e) = parked {
            return w.delete_failed(ctx, e).await;
        }
    }
    release_with_hosts(ctx, &w.rec, &hosts).await
}
