//! Subnets: a bridge with the gateway addresses in the router namespace, a VXLAN leg into
//! the hosting clusters' overlays, and a dnsmasq.

use std::collections::BTreeMap;
use std::net::IpAddr;

use osac_backends::checks::{self, MAX_VNI};
use osac_backends::{CreateSubnetRequest, CreateSubnetResponse, DeleteSubnetRequest, OpError};

use super::Inner;
use super::dnsmasq::{self, DnsmasqFiles};
use super::records::{SubnetRec, kind};
use super::render::{self, DnsmasqConf};
use crate::cmd;
use crate::kernel;
use crate::names;

impl Inner {
    pub(crate) async fn create_subnet(
        &mut self,
        r: CreateSubnetRequest,
    ) -> Result<CreateSubnetResponse, OpError> {
        checks::require_non_empty("subnet_id", &r.subnet_id)?;
        let vn = self.model.vn(&r.virtual_network_id)?;
        checks::subnet(&r, vn.ipv4_cidr, vn.ipv6_cidr)?;
        let rec = match self.model.subnets.get(&r.subnet_id) {
            Some(old) => {
                checks::same_subnet(&r, &old.vn, old.ipv4_cidr, old.ipv6_cidr)?;
                let mut rec = old.clone();
                if rec.vip_cidr != r.vip_cidr {
                    rec.vip_cidr = r.vip_cidr;
                    self.store.put(kind::SUBNET, &rec.id, &rec).await?;
                    self.model.subnets.insert(rec.id.clone(), rec.clone());
                }
                rec
            }
            None => {
                for s in self
                    .model
                    .subnets
                    .values()
                    .filter(|s| s.vn == r.virtual_network_id)
                {
                    checks::not_overlapping(&r, &s.id, s.ipv4_cidr, s.ipv6_cidr)?;
                }
                let rec = SubnetRec {
                    id: r.subnet_id.clone(),
                    vn: r.virtual_network_id.clone(),
                    segment_id: self.pick_segment(&r.subnet_id),
                    ipv4_cidr: r.ipv4_cidr,
                    ipv6_cidr: r.ipv6_cidr,
                    vip_cidr: r.vip_cidr,
                };
                self.store.put(kind::SUBNET, &rec.id, &rec).await?;
                self.model.subnets.insert(rec.id.clone(), rec.clone());
                rec
            }
        };
        self.build_subnet(&rec).await?;
        Ok(CreateSubnetResponse {
            segment_id: rec.segment_id,
            ipv4_gateway: rec.gw4().map(IpAddr::V4),
            ipv6_gateway: rec.gw6().map(IpAddr::V6),
        })
    }

    /// Segment id from the subnet id's hash (stable even if the state directory is lost),
    /// probing past ids already taken.
    fn pick_segment(&self, subnet_id: &str) -> i64 {
        let taken: std::collections::BTreeSet<i64> =
            self.model.subnets.values().map(|s| s.segment_id).collect();
        // The remainder is below MAX_VNI, so it always fits an i64.
        let start = osac_model::hash::fnv1a64(subnet_id.bytes()) % (MAX_VNI - 100).unsigned_abs();
        let mut v = i64::try_from(start).unwrap_or(0) + 100;
        while taken.contains(&v) {
            v = if v >= MAX_VNI { 100 } else { v + 1 };
        }
        v
    }

    /// Builds (or repairs) a subnet's bridge, gateway addresses, VXLAN leg and dnsmasq.
    pub(crate) async fn build_subnet(&self, s: &SubnetRec) -> Result<(), OpError> {
        self.router_ready(&s.vn).await?;
        let ns = names::router_ns(&s.vn);
        let br = names::subnet_bridge(&s.id);
        let created = kernel::ensure_bridge(&ns, &br, Some(self.settings.mtu)).await?;
        // The gateway has IPv6 (and a link-local address) only on a subnet with IPv6.
        kernel::set_ipv6(&ns, &br, s.ipv6_cidr.is_some()).await?;
        if let (Some(n), Some(gw)) = (s.ipv4_cidr, s.gw4()) {
            kernel::ensure_addr(&ns, &br, &format!("{gw}/{}", n.prefix_len())).await?;
        }
        if let (Some(n), Some(gw)) = (s.ipv6_cidr, s.gw6()) {
            kernel::ensure_addr(&ns, &br, &format!("{gw}/{}", n.prefix_len())).await?;
        }
        let local = kernel::underlay_addr(self.settings.underlay_ipv6_cidr, &ns);
        kernel::ensure_vxlan(&ns, s.segment_id, local, &br, self.settings.mtu).await?;
        cmd::nft(&ns, &render::add_bridge(&names::vn_table(&s.vn), &br)).await?;
        // Hairpin between workloads behind this one link (see `render::hairpin`): the guard
        // against reflected floods is in place before the port may reflect anything.
        let vx = names::vxlan_dev(s.segment_id);
        let mac = kernel::bridge_mac(&ns, &br);
        cmd::nft_converge(&ns, &render::hairpin_link(&vx, &mac)).await?;
        cmd::ip(
            Some(&ns),
            &[
                "link",
                "set",
                "dev",
                &vx,
                "type",
                "bridge_slave",
                "hairpin",
                "on",
            ],
        )
        .await?;
        self.write_dnsmasq(s, created).await
    }

    /// Rewrites a subnet's dnsmasq files from the model and makes sure it runs with them.
    pub(crate) async fn write_dnsmasq(&self, s: &SubnetRec, restart: bool) -> Result<(), OpError> {
        let ns = names::router_ns(&s.vn);
        let files = DnsmasqFiles::of(&self.settings, &s.id);
        let br = names::subnet_bridge(&s.id);
        let (hosts, leases, pid, log) = (
            files.hosts.display().to_string(),
            files.leases.display().to_string(),
            files.pid.display().to_string(),
            files.log.display().to_string(),
        );
        let conf = render::dnsmasq_conf(&DnsmasqConf {
            bridge: &br,
            ipv4: s.ipv4_cidr.zip(s.gw4()),
            ipv6: s.ipv6_cidr.zip(s.gw6()),
            mtu: self.settings.mtu,
            lease_seconds: self.settings.lease_seconds,
            dns_servers: &self.settings.dns_servers,
            hosts_dir: &hosts,
            lease_file: &leases,
            pid_file: &pid,
            log_file: &log,
        });
        let wanted: BTreeMap<String, String> = self
            .model
            .subnet_ports(&s.id)
            .map(|p| {
                (
                    dnsmasq::host_file_name(&p.mac),
                    render::dnsmasq_host(&p.mac, p.v4, p.v6, p.primary),
                )
            })
            .collect();
        let conf_changed = dnsmasq::write_if_changed(&files.conf, &conf).await?;
        let hosts = dnsmasq::sync_hosts(&files, &wanted).await?;
        if tokio::fs::metadata(&files.leases).await.is_err() {
            dnsmasq::write_if_changed(&files.leases, "").await?;
        }
        dnsmasq::ensure_running(&ns, &files, restart || conf_changed || hosts.retracted).await?;
        Ok(())
    }

    pub(crate) async fn delete_subnet(&mut self, r: DeleteSubnetRequest) -> Result<(), OpError> {
        let Some(s) = self.model.subnets.get(&r.subnet_id).cloned() else {
            return Ok(());
        };
        checks::subnet_in(&r.subnet_id, &s.vn, &r.virtual_network_id)?;
        let attachments: Vec<&str> = self
            .model
            .subnet_ports(&s.id)
            .map(|p| p.id.as_str())
            .collect();
        checks::subnet_unused(
            &s.id,
            attachments.len(),
            attachments.first().copied().unwrap_or(""),
        )?;
        dnsmasq::remove(&DnsmasqFiles::of(&self.settings, &s.id)).await?;
        let ns = names::router_ns(&s.vn);
        if cmd::netns_exists(&ns).await? {
            let br = names::subnet_bridge(&s.id);
            cmd::ip_ignore_missing(Some(&ns), &["link", "del", &names::vxlan_dev(s.segment_id)])
                .await?;
            cmd::ip_ignore_missing(Some(&ns), &["link", "del", &br]).await?;
            let table = names::vn_table(&s.vn);
            let mut script = format!("delete element inet {table} brs {{ \"{br}\" }}\n");
            script.push_str(&render::delete_hairpin_link(&names::vxlan_dev(
                s.segment_id,
            )));
            // The table may be gone with a hand-deleted namespace; nothing else to clean then.
            let _ = cmd::nft_converge(&ns, &script).await;
        }
        self.store
            .forget(kind::SUBNET, &mut self.model.subnets, &s.id)
            .await?;
        Ok(())
    }
}
