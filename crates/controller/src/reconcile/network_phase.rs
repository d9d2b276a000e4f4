//! The network phase of the workload reconcilers (ComputeInstance, BareMetalInstance,
//! Cluster), in the order it runs:
//!
//! 1. [`resolve`]: every subnet and security group of the attachments exists, is READY and is
//!    in one VirtualNetwork, whose managers serve the workload (recorded in
//!    [`VIRTUAL_NETWORK_ANNOTATION`], so the delete finds them even after the subnets went).
//! 2. [`attach`] (`NetworkingConfigured`): one fabric port per attachment moved onto its subnet
//!    with its security groups (a parked agent port leaves the parking network).
//! 3. [`discover`] (`IPDiscoveryComplete`): the fabric's DHCP leases of every port, each
//!    family its subnet serves (a dual-stack port's second family is waited for
//!    [`SECOND_FAMILY_GRACE`] at most).
//!
//! On deletion the ports are detached ([`detach_ports`]) through [`managers_for_delete`].

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use osac_backends::{
    CreateNetworkAttachmentRequest, DeleteNetworkAttachmentRequest, FabricManager, OpError,
    PortAddresses, QueryDhcpLeaseRequest,
};
use osac_model::kinds::workload::MachineAttachment;
use osac_model::{Kind, pb};
use osac_store::{Record, StoreError};

use super::conditions::{condition, since_condition};
use super::workload::{
    IP_DISCOVERY_COMPLETE, IP_DISCOVERY_TIMEOUT, NETWORKING_CONFIGURED, Step, Work, Workload, stop,
    timed,
};
use super::{Action, ReconcileCtx, ReconcileError, Resolved, VIRTUAL_NETWORK_ANNOTATION, describe};
use crate::dispatch::Managers;

/// The VirtualNetwork the workload's subnets are in, with its managers and the subnets.
pub(crate) struct Network {
    pub vn_id: String,
    pub managers: Managers,
    /// The subnet records, in the order asked for (deduplicated).
    pub subnets: Vec<Record>,
}

/// Phase 1: the workload's network from its `attachments` (each a subnet and its security
/// groups). A missing or not yet READY subnet or group is waited for; a failed one, or a mix
/// of networks, fails the workload (`NetworkingConfigured` FALSE either way).
pub(crate) async fn resolve<T: Workload>(
    ctx: &ReconcileCtx,
    w: &mut Work<T>,
    attachments: &[(&str, &[String])],
) -> Step<Network> {
    let subnets: Vec<&str> = attachments.iter().map(|(subnet, _)| *subnet).collect();
    let security_groups: Vec<&str> = attachments
        .iter()
        .flat_map(|(_, groups)| groups.iter().map(String::as_str))
        .collect();
    match resolve_network(ctx, &subnets, &security_groups).await? {
        Resolved::Ready(net) => {
            w.annotations
                .insert(VIRTUAL_NETWORK_ANNOTATION.to_string(), net.vn_id.clone());
            Ok(net)
        }
        Resolved::Wait(m) => {
            let wait = Action::Retry;
            stop(
                w.wait(ctx, NETWORKING_CONFIGURED, "WaitingForNetwork", m, wait)
                    .await,
            )
        }
        Resolved::Failed(e) => stop(w.failed(ctx, NETWORKING_CONFIGURED, e).await),
    }
}

/// Phase 1 of a machine (a VM or a bare-metal instance): a machine without `attachments`
/// fails (`empty` says why), else [`resolve`].
pub(crate) async fn resolve_machine<T: Workload>(
    ctx: &ReconcileCtx,
    w: &mut Work<T>,
    attachments: &[impl MachineAttachment],
    empty: &str,
) -> Step<Network> {
    if attachments.is_empty() {
        let e = OpError::permanent(empty);
        return stop(w.failed(ctx, NETWORKING_CONFIGURED, e).await);
    }
    let attachments: Vec<(&str, &[String])> = attachments
        .iter()
        .map(MachineAttachment::subnet_and_groups)
        .collect();
    resolve(ctx, w, &attachments).await
}

/// Phase 2, once per spec: every port onto its subnet, allowed to send from `allowed` too;
/// `NetworkingConfigured` TRUE with `summary`.
pub(crate) async fn attach<T: Workload>(
    ctx: &ReconcileCtx,
    w: &mut Work<T>,
    net: &Network,
    ports: &[Port],
    allowed: &[IpAddr],
    summary: String,
) -> Step<()> {
    if !w.done(NETWORKING_CONFIGURED) {
        let attached = attach_ports(&net.managers.fabric, &net.vn_id, ports, allowed);
        if let Err(e) = timed(T::KIND, "networking", attached).await {
            return stop(w.failed(ctx, NETWORKING_CONFIGURED, e).await);
        }
        w.set(NETWORKING_CONFIGURED, true, "PortsAttached", summary);
    }
    Ok(())
}

/// Whose addresses [`discover`] waits for, which words its messages.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Awaited {
    /// A VM's or bare-metal server's NICs, called this ("attachment", "interface").
    Nics(&'static str),
    /// A cluster's agents. After this long without every lease, the
    /// `NetworkingIPDiscoveryTimeout` condition names the agents still missing (discovery
    /// goes on).
    Agents(Duration),
}

/// Phase 3: the DHCP lease of every port, polled every [`lease_poll`] until each port has an
/// address of every family its subnet serves; `IPDiscoveryComplete` TRUE then.
pub(crate) async fn discover<T: Workload>(
    ctx: &ReconcileCtx,
    w: &mut Work<T>,
    net: &Network,
    ports: &[Port],
    awaited: Awaited,
) -> Step<Vec<PortAddresses>> {
    let leases = match timed(
        T::KIND,
        "ip_discovery",
        query_leases(&net.managers.fabric, ports),
    )
    .await
    {
        Ok(l) => l,
        Err(e) => return stop(w.failed(ctx, IP_DISCOVERY_COMPLETE, e).await),
    };
    let wanted = wanted_families(ports, &net.subnets);
    let partial_ok =
        since_condition(w.obj.conditions(), NETWORKING_CONFIGURED) >= SECOND_FAMILY_GRACE;
    let missing = describe_missing(ports, &leases, &wanted, partial_ok);
    let every = match awaited {
        Awaited::Nics(nic) => format!("every {nic} has an address"),
        Awaited::Agents(_) => "every agent has an address".to_string(),
    };
    if !missing.is_empty() {
        let m = match awaited {
            Awaited::Nics(_) => format!("waiting for the DHCP lease of {}", missing.join(", ")),
            Awaited::Agents(timeout) => agents_missing(w, ports, &leases, missing.len(), timeout),
        };
        let poll = Action::After(lease_poll(ctx));
        return stop(
            w.wait(ctx, IP_DISCOVERY_COMPLETE, "WaitingForLease", m, poll)
                .await,
        );
    }
    if condition(w.obj.conditions(), IP_DISCOVERY_TIMEOUT).is_some() {
        w.set(
            IP_DISCOVERY_TIMEOUT,
            false,
            "AddressesDiscovered",
            every.clone(),
        );
    }
    w.set(IP_DISCOVERY_COMPLETE, true, "AddressesDiscovered", every);
    Ok(leases)
}

/// The wait message of a cluster whose agents lack leases; past `timeout` also the
/// `NetworkingIPDiscoveryTimeout` condition.
fn agents_missing<T: Workload>(
    w: &mut Work<T>,
    ports: &[Port],
    leases: &[PortAddresses],
    missing: usize,
    timeout: Duration,
) -> String {
    let missing_hosts: Vec<String> = ports
        .iter()
        .zip(leases)
        .filter(|(_, l)| l.is_empty())
        .map(|(p, _)| format!("{} {}", p.host, p.mac_address))
        .collect();
    let waited = since_condition(w.obj.conditions(), NETWORKING_CONFIGURED);
    if waited >= timeout {
        let m = format!(
            "agent(s) without a DHCP lease after {}s: {}; still retrying",
            timeout.as_secs_f64(),
            missing_hosts.join(", ")
        );
        w.set(IP_DISCOVERY_TIMEOUT, true, "Timeout", m);
    }
    format!(
        "waiting for the DHCP lease of {missing} agent(s): {}",
        missing_hosts.join(", ")
    )
}

/// The per-attachment statuses of discovered `leases` (`interface` names each port's NIC) and
/// the primary port's address (IPv4, else IPv6).
pub(crate) fn attachment_statuses(
    ports: &[Port],
    leases: &[PortAddresses],
    interface: impl Fn(usize, &Port) -> String,
) -> (Vec<pb::AttachmentStatus>, String) {
    let statuses = ports
        .iter()
        .zip(leases)
        .enumerate()
        .map(|(n, (p, l))| {
            let (v4, v6) = lease_strings(l);
            pb::AttachmentStatus {
                interface: interface(n, p),
                subnet_ref: p.subnet_id.clone(),
                ip_address: v4,
                ipv6_address: v6,
                primary: p.primary,
                mac_address: p.mac_address.clone(),
            }
        })
        .collect();
    let primary = ports
        .iter()
        .zip(leases)
        .find(|(p, _)| p.primary)
        .map(|(_, l)| lease_primary(l))
        .unwrap_or_default();
    (statuses, primary)
}

/// How often IP discovery polls the fabric's leases.
pub(crate) fn lease_poll(ctx: &ReconcileCtx) -> Duration {
    (ctx.config.backoff_base * 2).clamp(Duration::from_millis(10), Duration::from_secs(5))
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
/// security groups of existing ones). Every port may also send from `allowed` (a cluster's
/// VIPs, which its agents answer for; VMs and bare-metal servers use no extra addresses).
/// The list replaces the one the fabric had, so callers always pass the complete set.
pub(crate) async fn attach_ports(
    fabric: &Arc<dyn FabricManager>,
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
    fabric: &Arc<dyn FabricManager>,
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
pub(crate) async fn query_leases(
    fabric: &Arc<dyn FabricManager>,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
