//! External addresses: allocation from the pools, inbound DNAT (ExternalIPAttachment) with
//! its route in the external namespace, outbound SNAT (NATGateway).

use std::net::IpAddr;

use ipnet::IpNet;
use osac_backends::checks;
use osac_backends::{
    AllocateExternalIpRequest, AllocateExternalIpResponse, CreateExternalIpAttachmentRequest,
    CreateNatGatewayRequest, DeleteExternalIpAttachmentRequest, DeleteNatGatewayRequest, OpError,
    ReleaseExternalIpRequest,
};

use super::Inner;
use super::records::{DnatRec, EipRec, SnatRec, VnRec, kind};
use super::render::{self, TableSite};
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
    /// The script that writes a rule (`rule` renders it for the VN's table name) into the
    /// router of VN `vn_id`, after the table's declaration; builds the router first if it is
    /// missing.
    async fn router_script(
        &self,
        vn_id: &str,
        rule: impl FnOnce(&str) -> String,
    ) -> Result<String, OpError> {
        self.router_ready(vn_id).await?;
        let table = names::vn_table(vn_id);
        let mut script = render::vn_table(&table, TableSite::Router);
        script.push_str(&rule(&table));
        Ok(script)
    }

    /// VN `vn_id`, where `me` (the user name `checks` gives an attachment or a gateway) is to
    /// take the external `address`: an error when the VN is unknown or the address is not
    /// free for `me`.
    fn vn_taking(&self, vn_id: &str, address: IpAddr, me: &str) -> Result<VnRec, OpError> {
        let vn = self.model.vn(vn_id)?.clone();
        self.model.external_address_free(address, me)?;
        Ok(vn)
    }

    /// Writes `rule` into the router of `vn` (see [`Self::router_script`]) and routes the
    /// `external` address to that router. `converge`: the rule adds map elements that may
    /// exist with other data, so it is applied with [`cmd::nft_converge`] (else atomically).
    async fn expose_through_router(
        &self,
        vn: &VnRec,
        external: IpAddr,
        converge: bool,
        rule: impl FnOnce(&str) -> String,
    ) -> Result<(), OpError> {
        let script = self.router_script(&vn.id, rule).await?;
        let ns = names::router_ns(&vn.id);
        if converge {
            cmd::nft_converge(&ns, &script).await?;
        } else {
            cmd::nft(&ns, &script).await?;
        }
        route_external(external, vn).await?;
        Ok(())
    }

    pub(crate) async fn allocate_external_ip(
        &mut self,
        r: AllocateExternalIpRequest,
    ) -> Result<AllocateExternalIpResponse, OpError> {
        checks::require_non_empty("external_ip_id", &r.external_ip_id)?;
        if let Some(e) = self.model.eips.get(&r.external_ip_id) {
            checks::same_pool(&r.external_ip_id, &e.pool, &r.pool_id)?;
            return Ok(AllocateExternalIpResponse { address: e.address });
        }
        let used: std::collections::BTreeSet<IpAddr> =
            self.model.eips.values().map(|e| e.address).collect();
        let address = checks::pick_external_address(&r, &|a: &IpAddr| used.contains(a))?;
        let rec = EipRec {
            id: r.external_ip_id,
            pool: r.pool_id,
            address,
        };
        self.store.put(kind::EIP, &rec.id, &rec).await?;
        self.model.eips.insert(rec.id.clone(), rec);
        Ok(AllocateExternalIpResponse { address })
    }

    pub(crate) async fn release_external_ip(
        &mut self,
        r: ReleaseExternalIpRequest,
    ) -> Result<(), OpError> {
        let Some(e) = self.model.eips.get(&r.external_ip_id).cloned() else {
            return Ok(());
        };
        let used_by = self.model.external_consumer(e.address);
        checks::releasable(&r, &e.pool, e.address, used_by.as_deref())?;
        self.store
            .forget(kind::EIP, &mut self.model.eips, &e.id)
            .await?;
        Ok(())
    }

    pub(crate) async fn create_dnat(
        &mut self,
        r: CreateExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        checks::require_non_empty("attachment_id", &r.attachment_id)?;
        let me = checks::external_ip_attachment_user(&r.attachment_id);
        let vn = self.vn_taking(&r.virtual_network_id, r.external_address, &me)?;
        let its_vn = self
            .model
            .dnats
            .get(&r.attachment_id)
            .map(|d| d.vn.as_str());
        checks::external_ip_attachment(&r, vn.ipv4_cidr, vn.ipv6_cidr, its_vn)?;
        let rec = DnatRec {
            id: r.attachment_id,
            vn: r.virtual_network_id,
            external: r.external_address,
            target: r.target_ip,
        };
        self.store
            .save(kind::DNAT, &mut self.model.dnats, &rec.id, &rec)
            .await?;
        self.expose_through_router(&vn, rec.external, true, |table| {
            render::dnat(table, rec.external, Some(rec.target))
        })
        .await
    }

    pub(crate) async fn delete_dnat(
        &mut self,
        r: DeleteExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        let Some(rec) = self.model.dnats.get(&r.attachment_id).cloned() else {
            return Ok(());
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
            == Some(&checks::external_ip_attachment_user(&rec.id))
        {
            unroute_external(rec.external).await?;
        }
        self.store
            .forget(kind::DNAT, &mut self.model.dnats, &rec.id)
            .await?;
        Ok(())
    }

    pub(crate) async fn create_nat_gateway(
        &mut self,
        r: CreateNatGatewayRequest,
    ) -> Result<(), OpError> {
        checks::require_non_empty("nat_gateway_id", &r.nat_gateway_id)?;
        let me = checks::nat_gateway_user(&r.nat_gateway_id);
        let vn = self.vn_taking(&r.virtual_network_id, r.external_address, &me)?;
        let other = self
            .model
            .snats
            .values()
            .find(|s| s.vn == vn.id && s.id != r.nat_gateway_id)
            .map(|s| s.id.as_str());
        let its_vn = self
            .model
            .snats
            .get(&r.nat_gateway_id)
            .map(|s| s.vn.as_str());
        checks::nat_gateway(&r, other, its_vn)?;
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
        self.store
            .save(kind::SNAT, &mut self.model.snats, &rec.id, &rec)
            .await?;
        self.expose_through_router(&vn, rec.external, false, |table| {
            render::snat(table, Some((rec.external, &rec.sources)))
        })
        .await
    }

    pub(crate) async fn delete_nat_gateway(
        &mut self,
        r: DeleteNatGatewayRequest,
    ) -> Result<(), OpError> {
        let Some(rec) = self.model.snats.get(&r.nat_gateway_id).cloned() else {
            return Ok(());
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
        self.store
            .forget(kind::SNAT, &mut self.model.snats, &rec.id)
            .await?;
        Ok(())
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
