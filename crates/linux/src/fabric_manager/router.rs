//! VirtualNetwork routers: a namespace with an uplink on the external bridge (transit
//! addresses, default routes), an underlay leg for VXLAN, and the per-VN nft tables.

use std::net::IpAddr;

use ipnet::IpNet;
use osac_backends::fabric_model::virtual_network;
use osac_backends::net::{ipv4_gateway, ipv6_gateway, lowest_free};
use osac_backends::{CreateVirtualNetworkRequest, DeleteVirtualNetworkRequest, OpError};

use super::Inner;
use super::records::Transit;
use super::render::{self, TableSite};
use crate::cmd;
use crate::kernel;
use crate::names::{self, EXT_BRIDGE, EXT_NS, UPLINK_IF};

/// A router's own sysctls: it forwards both families, and it answers ARP only for an address
/// of the interface the request arrived on (`arp_ignore=1`: a subnet learns its own gateway,
/// never the transit address nor another subnet's gateway) and speaks ARP only from such an
/// address (`arp_announce=2`).
const ROUTER_SYSCTLS: [&str; 5] = [
    "net.ipv4.ip_forward=1",
    "net.ipv6.conf.all.forwarding=1",
    "net.ipv6.conf.default.accept_dad=0",
    "net.ipv4.conf.all.arp_ignore=1",
    "net.ipv4.conf.all.arp_announce=2",
];

impl Inner {
    pub(crate) async fn create_virtual_network(
        &mut self,
        r: CreateVirtualNetworkRequest,
    ) -> Result<(), OpError> {
        let id = r.virtual_network_id.clone();
        let (changes, ()) = virtual_network::create(&self.model.state, r)?;
        if !self.model.transit.contains_key(&id) {
            let transit = self.pick_transit()?;
            self.model.transit.insert(id.clone(), transit);
        }
        self.commit(changes).await?;
        self.build_router(&id).await
    }

    /// The lowest free transit address of each family (never the transit gateway).
    fn pick_transit(&self) -> Result<Transit, OpError> {
        let used = self.model.transit_used();
        let t4 = self.settings.transit_ipv4_cidr;
        let t6 = self.settings.transit_ipv6_cidr;
        let gw4 = IpNet::V4(ipnet::Ipv4Net::from(ipv4_gateway(t4)));
        let gw6 = IpNet::V6(ipnet::Ipv6Net::from(ipv6_gateway(t6)));
        let pick = |net: IpNet, gw: IpNet| {
            lowest_free(net, &|a| used.contains(a), &[gw])
                .ok_or_else(|| OpError::permanent(format!("transit range {net} is exhausted")))
        };
        match (pick(IpNet::V4(t4), gw4)?, pick(IpNet::V6(t6), gw6)?) {
            (IpAddr::V4(v4), IpAddr::V6(v6)) => Ok(Transit { v4, v6 }),
            _ => Err(OpError::permanent(
                "transit allocation returned the wrong family",
            )),
        }
    }

    /// Builds (or repairs) a router namespace: everything `create_virtual_network` owns.
    pub(crate) async fn build_router(&self, vn_id: &str) -> Result<(), OpError> {
        let transit = *self.model.transit(vn_id)?;
        let ns = names::router_ns(vn_id);
        kernel::ensure_external(&self.settings).await?;
        cmd::ensure_netns(&ns).await?;
        kernel::prepare_bridging_ns(&ns, &ROUTER_SYSCTLS).await?;
        let ext_end = names::uplink_ext_end(vn_id);
        if cmd::link(&ns, UPLINK_IF).await?.is_none()
            || cmd::link(EXT_NS, &ext_end).await?.is_none()
        {
            cmd::ip_ignore_missing(Some(&ns), &["link", "del", UPLINK_IF]).await?;
            cmd::ip_ignore_missing(Some(EXT_NS), &["link", "del", &ext_end]).await?;
            cmd::ip(
                None,
                &[
                    "link", "add", &ext_end, "netns", EXT_NS, "type", "veth", "peer", "name",
                    UPLINK_IF, "netns", &ns,
                ],
            )
            .await?;
            // A new uplink has a new MAC: forget what the external network cached for our
            // transit addresses (a re-created router, or an earlier owner of the address),
            // else its traffic goes to a dead MAC until the stale entry is probed away.
            for addr in [transit.v4.to_string(), transit.v6.to_string()] {
                let _ = cmd::ip(Some(EXT_NS), &["neigh", "del", &addr, "dev", EXT_BRIDGE]).await;
            }
        }
        cmd::ip(
            Some(EXT_NS),
            &["link", "set", &ext_end, "master", EXT_BRIDGE, "up"],
        )
        .await?;
        kernel::set_ipv6(&ns, UPLINK_IF, true).await?;
        cmd::ip(Some(&ns), &["link", "set", UPLINK_IF, "up"]).await?;
        let t4 = self.settings.transit_ipv4_cidr;
        let t6 = self.settings.transit_ipv6_cidr;
        kernel::ensure_addr(
            &ns,
            UPLINK_IF,
            &format!("{}/{}", transit.v4, t4.prefix_len()),
        )
        .await?;
        kernel::ensure_addr(
            &ns,
            UPLINK_IF,
            &format!("{}/{}", transit.v6, t6.prefix_len()),
        )
        .await?;
        let gw4 = ipv4_gateway(t4).to_string();
        let gw6 = ipv6_gateway(t6).to_string();
        cmd::ip(
            Some(&ns),
            &["route", "replace", "default", "via", &gw4, "dev", UPLINK_IF],
        )
        .await?;
        cmd::ip(
            Some(&ns),
            &[
                "-6", "route", "replace", "default", "via", &gw6, "dev", UPLINK_IF,
            ],
        )
        .await?;
        kernel::ensure_underlay(&self.settings, &ns, &names::router_underlay_ext_end(vn_id))
            .await?;
        let table = names::vn_table(vn_id);
        let mut script = render::vn_table(&table, TableSite::Router);
        script.push_str(&render::bridge_table());
        script.push_str(&render::router_hairpin());
        cmd::nft(&ns, &script).await?;
        Ok(())
    }

    /// Makes sure the router of `vn` exists (rebuilding it when someone removed it).
    pub(crate) async fn router_ready(&self, vn_id: &str) -> Result<(), OpError> {
        self.model.vn(vn_id)?;
        let ns = names::router_ns(vn_id);
        if !cmd::netns_exists(&ns).await? || cmd::link(&ns, UPLINK_IF).await?.is_none() {
            self.build_router(vn_id).await?;
        }
        Ok(())
    }

    pub(crate) async fn delete_virtual_network(
        &mut self,
        r: DeleteVirtualNetworkRequest,
    ) -> Result<(), OpError> {
        let id = &r.virtual_network_id.clone();
        let (changes, ()) = virtual_network::delete(&self.model.state, r)?;
        cmd::delete_netns(&names::router_ns(id)).await?;
        for end in [
            names::uplink_ext_end(id),
            names::router_underlay_ext_end(id),
        ] {
            cmd::ip_ignore_missing(Some(EXT_NS), &["link", "del", &end]).await?;
        }
        for ns in cmd::list_netns().await? {
            if ns.starts_with(names::HOSTING_NS_PREFIX) {
                let table = names::vn_table(id);
                let script = format!("add table inet {table}\ndelete table inet {table}\n");
                cmd::nft(&ns, &script).await?;
            }
        }
        self.commit(changes).await
    }
}
