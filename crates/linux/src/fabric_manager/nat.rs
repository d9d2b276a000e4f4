//! External addresses: allocation from the pools, inbound DNAT (ExternalIPAttachment) with
//! its route in the external namespace, outbound SNAT (NATGateway).

use std::net::IpAddr;

use ipnet::IpNet;
use osac_backends::net::lowest_free;
use osac_backends::{
    AllocateExternalIpRequest, AllocateExternalIpResponse, CreateExternalIpAttachmentRequest,
    CreateNatGatewayRequest, DeleteExternalIpAttachmentRequest, DeleteNatGatewayRequest, OpError,
    ReleaseExternalIpRequest,
};

use super::records::{DnatRec, EipRec, SnatRec, VnRec, kind};
use super::render::{self, TableSite};
use super::{Inner, empty, missing_vn, no_host_bits, require_non_empty, to_json};
use crate::cmd;
use crate::names::{self, EXT_NS};

/// Host route prefix of an address.
fn host_route(a: IpAddr) -> String {
    match a {
        IpAddr::V4(a) => format!("{a}/32"),
        IpAddr::V6(a) => format!("{a}/128"),
    }
}

/// Routes `addr` in the external namespace to the VN's router transit address.
async fn route_external(addr: IpAddr, vn: &VnRec) -> Result<(), OpError> {
    let via = match addr {
        IpAddr::V4(_) => IpAddr::V4(vn.transit_v4),
        IpAddr::V6(_) => IpAddr::V6(vn.transit_v6),
    };
    let (dst, via) = (host_route(addr), via.to_string());
    cmd::ip(Some(EXT_NS), &["route", "replace", &dst, "via", &via]).await?;
    Ok(())
}

async fn unroute_external(addr: IpAddr) -> Result<(), OpError> {
    cmd::ip_ignore_missing(Some(EXT_NS), &["route", "del", &host_route(addr)]).await?;
    Ok(())
}

impl Inner {
    fn check_external(&self, addr: IpAddr, me: &str) -> Result<(), OpError> {
        if !self.model.external_allocated(addr) {
            return Err(OpError::permanent(format!(
                "external address {addr} is not allocated"
            )));
        }
        match self.model.external_consumer(addr) {
            Some(user) if user != me => Err(OpError::permanent(format!(
                "external address {addr} is already used by {user}"
            ))),
            _ => Ok(()),
        }
    }

    pub(crate) async fn allocate_external_ip(
        &mut self,
        r: AllocateExternalIpRequest,
    ) -> Result<serde_json::Value, OpError> {
        require_non_empty("external_ip_id", &r.external_ip_id)?;
        if let Some(e) = self.model.eips.get(&r.external_ip_id) {
            if e.pool != r.pool_id {
                return Err(OpError::permanent(format!(
                    "external IP '{}' is already allocated from pool '{}'",
                    r.external_ip_id, e.pool
                )));
            }
            return to_json(&AllocateExternalIpResponse { address: e.address });
        }
        if r.cidrs.is_empty() {
            return Err(OpError::permanent(format!(
                "pool '{}' has no CIDRs",
                r.pool_id
            )));
        }
        let mut cidrs = r.cidrs.clone();
        for c in &cidrs {
            no_host_bits("cidrs", *c)?;
        }
        cidrs.sort();
        let used: std::collections::BTreeSet<IpAddr> =
            self.model.eips.values().map(|e| e.address).collect();
        let address = cidrs
            .iter()
            .find_map(|c| lowest_free(*c, &|a| used.contains(a), &[]))
            .ok_or_else(|| {
                OpError::permanent(format!(
                    "pool exhausted: no free address left in external IP pool '{}'",
                    r.pool_id
                ))
            })?;
        let rec = EipRec {
            id: r.external_ip_id,
            pool: r.pool_id,
            address,
        };
        self.store.put(kind::EIP, &rec.id, &rec).await?;
        self.model.eips.insert(rec.id.clone(), rec);
        to_json(&AllocateExternalIpResponse { address })
    }

    pub(crate) async fn release_external_ip(
        &mut self,
        r: ReleaseExternalIpRequest,
    ) -> Result<serde_json::Value, OpError> {
        let Some(e) = self.model.eips.get(&r.external_ip_id).cloned() else {
            return Ok(empty());
        };
        if e.pool != r.pool_id {
            return Err(OpError::permanent(format!(
                "external IP '{}' belongs to pool '{}', not '{}'",
                e.id, e.pool, r.pool_id
            )));
        }
        if let Some(user) = self.model.external_consumer(e.address) {
            return Err(OpError::permanent(format!(
                "external address {} is still used by {user}",
                e.address
            )));
        }
        self.model.eips.remove(&e.id);
        self.store.delete(kind::EIP, &e.id).await?;
        Ok(empty())
    }

    pub(crate) async fn create_dnat(
        &mut self,
        r: CreateExternalIpAttachmentRequest,
    ) -> Result<serde_json::Value, OpError> {
        require_non_empty("attachment_id", &r.attachment_id)?;
        let vn = self
            .model
            .vns
            .get(&r.virtual_network_id)
            .cloned()
            .ok_or_else(|| missing_vn(&r.virtual_network_id))?;
        self.check_external(
            r.external_address,
            &format!("external IP attachment '{}'", r.attachment_id),
        )?;
        if r.external_address.is_ipv4() != r.target_ip.is_ipv4() {
            return Err(OpError::permanent(format!(
                "external address {} and target {} are of different IP families",
                r.external_address, r.target_ip
            )));
        }
        let inside = match r.target_ip {
            IpAddr::V4(a) => vn.ipv4_cidr.is_some_and(|n| n.contains(&a)),
            IpAddr::V6(a) => vn.ipv6_cidr.is_some_and(|n| n.contains(&a)),
        };
        if !inside {
            return Err(OpError::permanent(format!(
                "target {} is not inside virtual network '{}'",
                r.target_ip, r.virtual_network_id
            )));
        }
        if let Some(old) = self.model.dnats.get(&r.attachment_id)
            && old.vn != r.virtual_network_id
        {
            return Err(OpError::permanent(format!(
                "external IP attachment '{}' belongs to virtual network '{}'",
                r.attachment_id, old.vn
            )));
        }
        let rec = DnatRec {
            id: r.attachment_id,
            vn: r.virtual_network_id,
            external: r.external_address,
            target: r.target_ip,
        };
        if self.model.dnats.get(&rec.id) != Some(&rec) {
            self.store.put(kind::DNAT, &rec.id, &rec).await?;
            self.model.dnats.insert(rec.id.clone(), rec.clone());
        }
        self.router_ready(&vn.id).await?;
        let table = names::vn_table(&vn.id);
        let mut script = render::vn_table(&table, TableSite::Router);
        script.push_str(&render::dnat(&table, rec.external, Some(rec.target)));
        cmd::nft_converge(&names::router_ns(&vn.id), &script).await?;
        route_external(rec.external, &vn).await?;
        Ok(empty())
    }

    pub(crate) async fn delete_dnat(
        &mut self,
        r: DeleteExternalIpAttachmentRequest,
    ) -> Result<serde_json::Value, OpError> {
        let Some(rec) = self.model.dnats.get(&r.attachment_id).cloned() else {
            return Ok(empty());
        };
        let ns = names::router_ns(&rec.vn);
        if cmd::netns_exists(&ns).await? {
            cmd::nft_converge(
                &ns,
                &render::dnat(&names::vn_table(&rec.vn), rec.external, None),
            )
            .await?;
            // Open sessions through the removed address stop now (not at conntrack timeout).
            flush_conntrack(&ns, rec.external, "--orig-dst").await;
        }
        if self.model.external_consumer(rec.external).as_deref()
            == Some(&format!("external IP attachment '{}'", rec.id))
        {
            unroute_external(rec.external).await?;
        }
        self.model.dnats.remove(&rec.id);
        self.store.delete(kind::DNAT, &rec.id).await?;
        Ok(empty())
    }

    pub(crate) async fn create_nat_gateway(
        &mut self,
        r: CreateNatGatewayRequest,
    ) -> Result<serde_json::Value, OpError> {
        require_non_empty("nat_gateway_id", &r.nat_gateway_id)?;
        let vn = self
            .model
            .vns
            .get(&r.virtual_network_id)
            .cloned()
            .ok_or_else(|| missing_vn(&r.virtual_network_id))?;
        self.check_external(
            r.external_address,
            &format!("NAT gateway '{}'", r.nat_gateway_id),
        )?;
        if let Some(other) = self
            .model
            .snats
            .values()
            .find(|s| s.vn == vn.id && s.id != r.nat_gateway_id)
        {
            return Err(OpError::permanent(format!(
                "virtual network '{}' already has NAT gateway '{}'",
                vn.id, other.id
            )));
        }
        if let Some(old) = self.model.snats.get(&r.nat_gateway_id)
            && old.vn != vn.id
        {
            return Err(OpError::permanent(format!(
                "NAT gateway '{}' belongs to virtual network '{}'",
                r.nat_gateway_id, old.vn
            )));
        }
        for c in &r.source_cidrs {
            no_host_bits("source_cidrs", *c)?;
        }
        let mut sources: Vec<IpNet> = r.source_cidrs.clone();
        if sources.is_empty() {
            sources.extend(vn.ipv4_cidr.map(IpNet::V4));
            sources.extend(vn.ipv6_cidr.map(IpNet::V6));
        }
        let rec = SnatRec {
            id: r.nat_gateway_id,
            vn: vn.id.clone(),
            external: r.external_address,
            sources,
        };
        if self.model.snats.get(&rec.id) != Some(&rec) {
            self.store.put(kind::SNAT, &rec.id, &rec).await?;
            self.model.snats.insert(rec.id.clone(), rec.clone());
        }
        self.router_ready(&vn.id).await?;
        let table = names::vn_table(&vn.id);
        let mut script = render::vn_table(&table, TableSite::Router);
        script.push_str(&render::snat(&table, Some((rec.external, &rec.sources))));
        cmd::nft(&names::router_ns(&vn.id), &script).await?;
        route_external(rec.external, &vn).await?;
        Ok(empty())
    }

    pub(crate) async fn delete_nat_gateway(
        &mut self,
        r: DeleteNatGatewayRequest,
    ) -> Result<serde_json::Value, OpError> {
        let Some(rec) = self.model.snats.get(&r.nat_gateway_id).cloned() else {
            return Ok(empty());
        };
        let ns = names::router_ns(&rec.vn);
        if cmd::netns_exists(&ns).await? {
            cmd::nft(&ns, &render::snat(&names::vn_table(&rec.vn), None)).await?;
            // Flows translated to the gateway's address stop using it now: the address is
            // released next and may go to another tenant. Their next packet is a new flow
            // (masqueraded to the router's transit address).
            flush_conntrack(&ns, rec.external, "--reply-dst").await;
        }
        unroute_external(rec.external).await?;
        self.model.snats.remove(&rec.id);
        self.store.delete(kind::SNAT, &rec.id).await?;
        Ok(empty())
    }
}

/// Deletes the conntrack entries of `ns` whose `selector` (`--orig-dst`: DNAT'ed to the
/// address; `--reply-dst`: SNAT'ed to it) is `addr`. Best effort: an entry left behind only
/// lives until its timeout, and "nothing to delete" is the common case.
async fn flush_conntrack(ns: &str, addr: IpAddr, selector: &str) {
    let family = if addr.is_ipv4() { "ipv4" } else { "ipv6" };
    let addr = addr.to_string();
    if let Err(e) = cmd::in_ns(
        ns,
        "conntrack",
        &["-D", "-f", family, selector, &addr],
        None,
    )
    .await
        && !e.to_string().contains("0 flow entries")
    {
        tracing::warn!(error = %e, namespace = ns, "conntrack flush failed");
    }
}
