//! Workload ports: the veth "cable" between a machine namespace and a switch (subnet bridge,
//! hosting-cluster overlay bridge, or the parking bridge), its DHCP reservation, anti-spoofing
//! and security-group membership.

use std::net::IpAddr;

use ipnet::IpNet;
use osac_backends::checks;
use osac_backends::fabric_model::{NetworkAttachmentRecord, Record, network_attachment};
use osac_backends::{
    CreateNetworkAttachmentRequest, DeleteNetworkAttachmentRequest, OpError, PortAddresses,
    QueryDhcpLeaseRequest,
};

use super::Inner;
use super::dnsmasq::{self, DnsmasqFiles};
use super::records::Placement;
use super::render::{self, PortIdentity, TableSite};
use crate::cmd::{self, CmdError};
use crate::kernel;
use crate::names::{self, PARK_BRIDGE, PARK_NS};

/// Where the switch end of a cable goes.
#[derive(Debug, Clone)]
pub struct Switch<'a> {
    /// Namespace of the switch end.
    pub ns: &'a str,
    /// Bridge it is enslaved to.
    pub bridge: &'a str,
}

/// Makes sure machine `key` has interface `ifname` with `mac`, up, whose veth peer `sw` sits on
/// `switch`. An existing switch end found in one of `search` (e.g. the parking namespace) is
/// moved, so the machine keeps its interface; otherwise the pair is (re)created.
pub async fn ensure_cable(
    key: &str,
    ifname: &str,
    mac: &str,
    mtu: u32,
    switch: &Switch<'_>,
    search: &[&str],
) -> Result<(), CmdError> {
    let mns = names::machine_ns(key);
    let sw = names::port_switch_end(key, ifname);
    cmd::ensure_netns(&mns).await?;
    let mut present = cmd::link(switch.ns, &sw).await?.is_some();
    if !present {
        for ns in search.iter().filter(|ns| **ns != switch.ns) {
            if cmd::link(ns, &sw).await?.is_some() {
                cmd::ip(Some(ns), &["link", "set", &sw, "netns", switch.ns]).await?;
                present = true;
                break;
            }
        }
    }
    let mut machine_end = None;
    if present {
        machine_end = cmd::link(&mns, ifname).await?;
        if machine_end.is_none() {
            // The machine end is gone (machine namespace re-created): start over.
            cmd::ip_ignore_missing(Some(switch.ns), &["link", "del", &sw]).await?;
            present = false;
        }
    }
    let mtu_s = mtu.to_string();
    if !present {
        cmd::ip_ignore_missing(Some(&mns), &["link", "del", ifname]).await?;
        cmd::ip(
            None,
            &[
                "link", "add", &sw, "netns", switch.ns, "mtu", &mtu_s, "type", "veth", "peer",
                "name", ifname, "netns", &mns, "address", mac, "mtu", &mtu_s,
            ],
        )
        .await?;
    } else if machine_end.as_ref().and_then(|l| l.address.as_deref()) != Some(mac) {
        // (A pair created just now already carries the MAC.)
        cmd::ip(Some(&mns), &["link", "set", ifname, "address", mac]).await?;
    }
    cmd::ip(Some(&mns), &["link", "set", ifname, "mtu", &mtu_s, "up"]).await?;
    cmd::ip(
        Some(switch.ns),
        &[
            "link",
            "set",
            &sw,
            "mtu",
            &mtu_s,
            "master",
            switch.bridge,
            "up",
        ],
    )
    .await?;
    Ok(())
}

/// Creates (or repairs) an idle cluster agent's port on the parking bridge: machine namespace
/// [`names::machine_ns`]`(key)` with interface `ifname`/`mac`. For the provisioner; the fabric
/// moves the switch end to a subnet on `create_network_attachment` and back on a parking
/// `delete_network_attachment`.
pub async fn ensure_parked_port(
    key: &str,
    ifname: &str,
    mac: &str,
    mtu: u32,
) -> Result<(), CmdError> {
    kernel::ensure_park().await?;
    ensure_cable(
        key,
        ifname,
        mac,
        mtu,
        &Switch {
            ns: PARK_NS,
            bridge: PARK_BRIDGE,
        },
        &[],
    )
    .await
}

impl Inner {
    pub(crate) async fn create_port(
        &mut self,
        r: CreateNetworkAttachmentRequest,
    ) -> Result<PortAddresses, OpError> {
        checks::attachment_port(&r.attachment_id, &r.host, &r.interface)?;
        let (key, ifname, _) = names::machine_of(&r.host, &r.interface);
        if key.is_empty() || ifname.is_empty() || ifname.len() > 15 || ifname.contains(['/', ' ']) {
            return Err(OpError::permanent(format!(
                "interface '{}' is not a valid interface name (at most 15 characters)",
                r.interface
            )));
        }
        let old = self.model.state.attachment(&r.attachment_id).cloned();
        if old.is_none() {
            // One machine interface, one attachment: two hosts' names may map to the same
            // machine here (a VM seen through two hosting clusters).
            if let Some(other) = self
                .model
                .state
                .attachments()
                .find(|p| p.machine().0 == key && p.machine().1 == ifname)
            {
                return Err(checks::port_taken(
                    &r.host,
                    &r.interface,
                    &other.attachment_id,
                ));
            }
        }
        let id = r.attachment_id.clone();
        let (changes, addresses) = network_attachment::create(&self.model.state, r)?;
        let Some(planned) = changes.iter().find_map(|(_, r)| match r {
            Some(Record::Attachment(a)) => Some(a.clone()),
            _ => None,
        }) else {
            return Err(OpError::permanent(format!(
                "network attachment '{id}' was not planned"
            )));
        };
        let unmarked = self.model.mark(&id) == 0;
        if let Some(old) = &old {
            // Addresses the port stops claiming are re-steered without it, and a port recorded
            // without a mark leaves the address-keyed maps, before the record changes: a
            // failure here is simply retried.
            let withdrawn: Vec<IpAddr> = old
                .allowed_addresses
                .iter()
                .filter(|a| !planned.allowed_addresses.contains(a))
                .copied()
                .collect();
            self.withdraw_vips(old, &withdrawn).await?;
            if unmarked {
                self.retire_address_egress_maps(old).await?;
            }
        }
        if unmarked {
            let mark = self.model.free_mark(&planned.switch_ns());
            self.model.marks.insert(id.clone(), mark);
        }
        self.commit(changes).await?;
        if unmarked && old.as_ref() == Some(&planned) {
            // The record did not change, its mark did.
            self.persist_attachment(&id).await?;
        }
        let rec = planned;
        self.build_port(&rec).await?;
        Ok(addresses)
    }

    /// A port recorded by an earlier version (no mark) sits in a VN table whose address-keyed
    /// egress maps still reference port chains: rewrite the base chains and remove the maps.
    async fn retire_address_egress_maps(&self, p: &NetworkAttachmentRecord) -> Result<(), OpError> {
        let ns = p.switch_ns();
        if !cmd::netns_exists(&ns).await? {
            return Ok(());
        }
        let table = names::vn_table(&p.virtual_network_id);
        let mut script = render::vn_table(&table, p.table_site());
        script.push_str(&render::retire_address_egress_maps(&table));
        cmd::nft_converge(&ns, &script).await?;
        Ok(())
    }

    /// Programs everything of one port (idempotent): cable, anti-spoofing, security groups
    /// (of its addresses and of the allowed addresses it claims), DHCP reservation.
    async fn build_port(&self, p: &NetworkAttachmentRecord) -> Result<(), OpError> {
        let subnet = self.model.subnet(&p.subnet_id)?.clone();
        let (key, ifname, is_vm) = p.machine();
        let ns = p.switch_ns();
        let (vn, subnet_id) = (&p.virtual_network_id, &p.subnet_id);
        let br = names::subnet_bridge(subnet_id);
        let table = names::vn_table(vn);
        let mut prelude = String::new();
        if is_vm {
            if !cmd::netns_exists(&ns).await? || cmd::link(&ns, &br).await?.is_none() {
                return Err(OpError::transient(format!(
                    "the overlay of subnet '{}' on hosting cluster '{}' is not ready (create_subnet_overlay first)",
                    subnet_id, p.host
                )));
            }
            kernel::enable_br_netfilter(&ns).await?;
            // The hosting cluster's copy of the VN table goes into the port's transaction below.
            prelude.push_str(&render::vn_table(&table, TableSite::Hosting));
            prelude.push_str(&render::add_bridge(&table, &br));
            prelude.push_str(&render::add_dhcp_server(
                &table,
                subnet.gw4(),
                subnet
                    .ipv6_cidr
                    .and_then(|_| kernel::gateway_link_local(vn, subnet_id)),
            ));
        } else {
            self.router_ready(vn).await?;
            if cmd::link(&ns, &br).await?.is_none() {
                self.build_subnet(&subnet).await?;
            }
        }
        ensure_cable(
            &key,
            &ifname,
            &p.mac_address,
            self.settings.mtu,
            &Switch {
                ns: &ns,
                bridge: &br,
            },
            &[PARK_NS],
        )
        .await?;

        let sw = p.switch_end();
        let sources: Vec<IpNet> = p.source_addresses().into_iter().map(IpNet::from).collect();
        let identity = PortIdentity {
            mac: p.mac_address.clone(),
            ipv4: sources
                .iter()
                .filter(|n| n.addr().is_ipv4())
                .copied()
                .collect(),
            ipv6: sources
                .iter()
                .filter(|n| n.addr().is_ipv6())
                .copied()
                .collect(),
            gateway_link_local: kernel::gateway_link_local(vn, subnet_id),
        };
        let mut script = prelude;
        script.push_str(&render::bridge_table());
        script.push_str(&render::anti_spoof(&sw, &identity));
        for sg in &p.security_groups {
            if let Some(g) = self.model.state.sg(sg) {
                script.push_str(&render::sg_chains(&table, sg, &g.ingress, &g.egress));
            }
        }
        script.push_str(&render::port_sg(
            &table,
            &sw,
            &p.security_groups,
            &self.model.sg_keys(p),
        ));
        script.push_str(&self.vip_script(&table, vn, &ns, &p.allowed_addresses, ""));
        cmd::nft_converge(&ns, &script).await?;
        self.write_dnsmasq(&subnet, false).await
    }

    pub(crate) async fn delete_port(
        &mut self,
        r: DeleteNetworkAttachmentRequest,
    ) -> Result<(), OpError> {
        let (changes, ()) = network_attachment::delete(&self.model.state, r.clone())?;
        let (key, ifname, is_vm) = names::machine_of(&r.host, &r.interface);
        let sw = names::port_switch_end(&key, &ifname);
        let rec = self.model.state.attachment(&r.attachment_id).cloned();
        // Where the switch end may be: the attachment's switch namespace, else derived from the
        // request (second call after a crash).
        let switch_ns = match (&rec, is_vm) {
            (Some(p), _) => Some(p.switch_ns()),
            (None, true) => Some(names::hosting_ns(&r.host)),
            (None, false) => self
                .model
                .state
                .subnet(&r.subnet_id)
                .map(|s| names::router_ns(&s.virtual_network_id)),
        };
        // Another attachment now owns the port: leave the cable alone.
        let taken_by_other = self.model.state.attachments().any(|p| {
            p.attachment_id != r.attachment_id && p.machine().0 == key && p.machine().1 == ifname
        });
        if let Some(p) = &rec {
            let ns = p.switch_ns();
            if cmd::netns_exists(&ns).await? {
                let vn = &p.virtual_network_id;
                let table = names::vn_table(vn);
                let mut script = render::bridge_table();
                script.push_str(&render::delete_anti_spoof(&sw));
                script.push_str(&render::vn_table(&table, p.table_site()));
                script.push_str(&render::delete_port_sg(&table, &sw, &self.model.sg_keys(p)));
                // VIPs it claimed: steered by the remaining claimants, or unsteered.
                let vips = &p.allowed_addresses;
                script.push_str(&self.vip_script(&table, vn, &ns, vips, &p.attachment_id));
                cmd::nft_converge(&ns, &script).await?;
            }
            self.release_lease(p).await;
        }
        if !taken_by_other {
            if r.park {
                kernel::ensure_park().await?;
                let mac = checks::mac_address(&r.mac_address)?.to_string();
                let search: Vec<&str> = switch_ns.iter().map(String::as_str).collect();
                ensure_cable(
                    &key,
                    &ifname,
                    &mac,
                    self.settings.mtu,
                    &Switch {
                        ns: PARK_NS,
                        bridge: PARK_BRIDGE,
                    },
                    &search,
                )
                .await?;
            } else if let Some(ns) = &switch_ns
                && cmd::netns_exists(ns).await?
            {
                cmd::ip_ignore_missing(Some(ns), &["link", "del", &sw]).await?;
            }
        }
        self.commit(changes).await?;
        if let Some(p) = rec
            && let Some(s) = self.model.state.subnet(&p.subnet_id).cloned()
        {
            self.write_dnsmasq(&s, false).await?;
        }
        Ok(())
    }

    /// Tells dnsmasq to forget a port's IPv4 lease (best effort: `dhcp_release` is optional;
    /// without it the lease simply expires and is no longer reported).
    async fn release_lease(&self, p: &NetworkAttachmentRecord) {
        let (Some(v4), true) = (p.ipv4_address, cmd::on_path("dhcp_release")) else {
            return;
        };
        let ns = names::router_ns(&p.virtual_network_id);
        let br = names::subnet_bridge(&p.subnet_id);
        let args = [br.as_str(), &v4.to_string(), &p.mac_address];
        let _ = cmd::in_ns(&ns, "dhcp_release", &args, None).await;
    }

    pub(crate) async fn query_lease(
        &self,
        r: QueryDhcpLeaseRequest,
    ) -> Result<PortAddresses, OpError> {
        let files = DnsmasqFiles::of(&self.settings, &r.subnet_id);
        let mac = checks::mac_address(&r.mac_address).map(|m| m.to_string());
        let (_, reserved) = network_attachment::query_dhcp_lease(&self.model.state, r)?;
        // A workload waiting for its lease learns why none comes.
        dnsmasq::health(&files, false).await?;
        if reserved == PortAddresses::default() {
            return Ok(reserved);
        }
        let mac = mac?;
        let text = tokio::fs::read_to_string(&files.leases)
            .await
            .unwrap_or_default();
        let leases = render::parse_leases(&text);
        let v4 = reserved.ipv4_address.filter(|a| {
            leases
                .iter()
                .any(|l| l.address == *a && l.mac.as_deref() == Some(mac.as_str()))
        });
        let v6 = reserved
            .ipv6_address
            .filter(|a| leases.iter().any(|l| l.address == *a));
        Ok(PortAddresses {
            ipv4_address: v4,
            ipv6_address: v6,
        })
    }
}
