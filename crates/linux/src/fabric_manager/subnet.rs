//! Subnets: a bridge with the gateway addresses in the router namespace, a VXLAN leg into
//! the hosting clusters' overlays, and a dnsmasq.

use std::collections::BTreeMap;

use osac_backends::fabric_model::{SubnetRecord, subnet};
use osac_backends::{CreateSubnetRequest, CreateSubnetResponse, DeleteSubnetRequest, OpError};

use super::Inner;
use super::dnsmasq::{self, DnsmasqFiles};
use super::render::{self, DnsmasqConf};
use crate::cmd;
use crate::kernel;
use crate::names;

impl Inner {
    pub(crate) async fn create_subnet(
        &mut self,
        r: CreateSubnetRequest,
    ) -> Result<CreateSubnetResponse, OpError> {
        let id = r.subnet_id.clone();
        let (changes, response) = subnet::create(&self.model.state, r)?;
        self.commit(changes).await?;
        let rec = self.model.subnet(&id)?.clone();
        self.build_subnet(&rec).await?;
        Ok(response)
    }

    /// Builds (or repairs) a subnet's bridge, gateway addresses, VXLAN leg and dnsmasq.
    pub(crate) async fn build_subnet(&self, s: &SubnetRecord) -> Result<(), OpError> {
        self.router_ready(&s.virtual_network_id).await?;
        let ns = names::router_ns(&s.virtual_network_id);
        let br = names::subnet_bridge(&s.subnet_id);
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
        cmd::nft(
            &ns,
            &render::add_bridge(&names::vn_table(&s.virtual_network_id), &br),
        )
        .await?;
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
    pub(crate) async fn write_dnsmasq(
        &self,
        s: &SubnetRecord,
        restart: bool,
    ) -> Result<(), OpError> {
        let ns = names::router_ns(&s.virtual_network_id);
        let files = DnsmasqFiles::of(&self.settings, &s.subnet_id);
        let br = names::subnet_bridge(&s.subnet_id);
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
            .state
            .attachments_of_subnet(&s.subnet_id)
            .map(|p| {
                (
                    dnsmasq::host_file_name(&p.mac_address),
                    render::dnsmasq_host(&p.mac_address, p.ipv4_address, p.ipv6_address, p.primary),
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
        let Some(s) = self.model.state.subnet(&r.subnet_id).cloned() else {
            return Ok(());
        };
        let (changes, ()) = subnet::delete(&self.model.state, r)?;
        dnsmasq::remove(&DnsmasqFiles::of(&self.settings, &s.subnet_id)).await?;
        let ns = names::router_ns(&s.virtual_network_id);
        if cmd::netns_exists(&ns).await? {
            let br = names::subnet_bridge(&s.subnet_id);
            cmd::ip_ignore_missing(Some(&ns), &["link", "del", &names::vxlan_dev(s.segment_id)])
                .await?;
            cmd::ip_ignore_missing(Some(&ns), &["link", "del", &br]).await?;
            let table = names::vn_table(&s.virtual_network_id);
            let mut script = format!("delete element inet {table} brs {{ \"{br}\" }}\n");
            script.push_str(&render::delete_hairpin_link(&names::vxlan_dev(
                s.segment_id,
            )));
            // The table may be gone with a hand-deleted namespace; nothing else to clean then.
            let _ = cmd::nft_converge(&ns, &script).await;
        }
        self.commit(changes).await
    }
}
