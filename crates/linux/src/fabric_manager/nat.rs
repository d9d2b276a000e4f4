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

use osac_backends::fabric_model::{
    VirtualNetworkRecord, external_ip, external_ip_attachment, nat_gateway,
};

use super::Inner;
use super::records::Transit;
use super::render::meter::{self, MeterPath};
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
async fn route_external(addr: IpAddr, transit: &Transit) -> Result<(), OpError> {
    let via = match addr {
        IpAddr::V4(_) => IpAddr::V4(transit.v4),
        IpAddr::V6(_) => IpAddr::V6(transit.v6),
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

    /// Writes `rule` into the router of `vn` (see [`Self::router_script`]) and routes the
    /// `external` address to that router. `converge`: the rule adds map elements that may
    /// exist with other data, so it is applied with [`cmd::nft_converge`] (else atomically).
    async fn expose_through_router(
        &self,
        vn_id: &str,
        external: IpAddr,
        converge: bool,
        rule: impl FnOnce(&str) -> String,
    ) -> Result<(), OpError> {
        let script = self.router_script(vn_id, rule).await?;
        let ns = names::router_ns(vn_id);
        if converge {
            cmd::nft_converge(&ns, &script).await?;
        } else {
            cmd::nft(&ns, &script).await?;
        }
        route_external(external, self.model.transit(vn_id)?).await?;
        Ok(())
    }

    pub(crate) async fn allocate_external_ip(
        &mut self,
        r: AllocateExternalIpRequest,
    ) -> Result<AllocateExternalIpResponse, OpError> {
        let (changes, response) = external_ip::allocate(&self.model.state, r)?;
        self.commit(changes).await?;
        Ok(response)
    }

    pub(crate) async fn release_external_ip(
        &mut self,
        r: ReleaseExternalIpRequest,
    ) -> Result<(), OpError> {
        let (changes, ()) = external_ip::release(&self.model.state, r)?;
        self.commit(changes).await
    }

    pub(crate) async fn create_dnat(
        &mut self,
        r: CreateExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        let (changes, ()) = external_ip_attachment::create(&self.model.state, r.clone())?;
        self.commit(changes).await?;
        self.expose_through_router(&r.virtual_network_id, r.external_address, true, |table| {
            let mut script = render::dnat(table, r.external_address, Some(r.target_ip));
            script.push_str(&meter::attach(
                table,
                MeterPath::Dnat,
                &r.attachment_id,
                r.external_address,
            ));
            script
        })
        .await
    }

    pub(crate) async fn delete_dnat(
        &mut self,
        r: DeleteExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        let Some(rec) = self.model.state.dnat(&r.attachment_id).cloned() else {
            return Ok(());
        };
        let (changes, ()) = external_ip_attachment::delete(&self.model.state, r)?;
        let (vn, external) = (&rec.virtual_network_id, rec.external_address);
        let ns = names::router_ns(vn);
        if cmd::netns_exists(&ns).await? {
            let table = names::vn_table(vn);
            let mut script = render::dnat(&table, external, None);
            script.push_str(&meter::detach(
                &table,
                MeterPath::Dnat,
                &rec.attachment_id,
                external,
            ));
            cmd::nft_converge(&ns, &script).await?;
            // Open sessions through the removed address stop now (not at conntrack timeout).
            flush_conntrack(&ns, external, "--orig-dst").await;
        }
        if self.model.state.external_consumer(external)
            == Some(checks::external_ip_attachment_user(&rec.attachment_id).as_str())
        {
            unroute_external(external).await?;
        }
        self.commit(changes).await
    }

    pub(crate) async fn create_nat_gateway(
        &mut self,
        r: CreateNatGatewayRequest,
    ) -> Result<(), OpError> {
        let (changes, ()) = nat_gateway::create(&self.model.state, r.clone())?;
        self.commit(changes).await?;
        let sources = translated_sources(&r.source_cidrs, self.model.vn(&r.virtual_network_id)?);
        // Converged: the counters' map elements may exist already (a repeated create).
        self.expose_through_router(&r.virtual_network_id, r.external_address, true, |table| {
            let mut script = render::snat(table, Some((r.external_address, &sources)));
            script.push_str(&meter::attach(
                table,
                MeterPath::Snat,
                &r.nat_gateway_id,
                r.external_address,
            ));
            script
        })
        .await
    }

    pub(crate) async fn delete_nat_gateway(
        &mut self,
        r: DeleteNatGatewayRequest,
    ) -> Result<(), OpError> {
        let Some(rec) = self.model.state.snat(&r.nat_gateway_id).cloned() else {
            return Ok(());
        };
        let (changes, ()) = nat_gateway::delete(&self.model.state, r)?;
        let ns = names::router_ns(&rec.virtual_network_id);
        if cmd::netns_exists(&ns).await? {
            let table = names::vn_table(&rec.virtual_network_id);
            cmd::nft(&ns, &render::snat(&table, None)).await?;
            let detach = meter::detach(
                &table,
                MeterPath::Snat,
                &rec.nat_gateway_id,
                rec.external_address,
            );
            cmd::nft_converge(&ns, &detach).await?;
            // Flows translated to the gateway's address stop using it now: the address is
            // released next and may go to another tenant. Their next packet is a new flow
            // (masqueraded to the router's transit address).
            flush_conntrack(&ns, rec.external_address, "--reply-dst").await;
        }
        unroute_external(rec.external_address).await?;
        self.commit(changes).await
    }
}

/// The sources a NAT gateway translates: those it names, else its VirtualNetwork's prefixes.
fn translated_sources(named: &[IpNet], vn: &VirtualNetworkRecord) -> Vec<IpNet> {
    if !named.is_empty() {
        return named.to_vec();
    }
    vn.ipv4_cidr
        .map(IpNet::V4)
        .into_iter()
        .chain(vn.ipv6_cidr.map(IpNet::V6))
        .collect()
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
