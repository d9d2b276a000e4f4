//! Security groups: one chain pair per group in every namespace that enforces it (the VN's
//! router, and each hosting cluster with ports of the group), replaced atomically. The script
//! stays flat in the number of groups: `cmd::nft` sends its rules in block form, for which
//! nft does not load every chain of the namespace first (see `cmd::compact`).

use osac_backends::checks;
use osac_backends::{ApplySecurityGroupRequest, DeleteSecurityGroupRequest, OpError};

use super::Inner;
use super::records::{SgRec, kind};
use super::render::{self, TableSite};
use crate::cmd;
use crate::names;

impl Inner {
    /// Namespaces enforcing group `sg` of `vn`: the router plus hosting clusters with its ports.
    fn sg_namespaces(&self, vn: &str, sg: &str) -> Vec<(String, TableSite)> {
        let mut out = vec![(names::router_ns(vn), TableSite::Router)];
        for ns in self.model.hosting_namespaces_of(vn) {
            if self.model.sgs_in_ns(vn, &ns).contains(sg) {
                out.push((ns, TableSite::Hosting));
            }
        }
        out
    }

    pub(crate) async fn apply_security_group(
        &mut self,
        r: ApplySecurityGroupRequest,
    ) -> Result<(), OpError> {
        checks::require_non_empty("security_group_id", &r.security_group_id)?;
        self.model.vn(&r.virtual_network_id)?;
        let its_vn = self
            .model
            .sgs
            .get(&r.security_group_id)
            .map(|g| g.vn.as_str());
        checks::security_group(&r, its_vn)?;
        let rec = SgRec {
            id: r.security_group_id,
            vn: r.virtual_network_id,
            ingress: r.ingress,
            egress: r.egress,
        };
        self.store
            .save(kind::SG, &mut self.model.sgs, &rec.id, &rec)
            .await?;
        self.router_ready(&rec.vn).await?;
        let table = names::vn_table(&rec.vn);
        for (ns, site) in self.sg_namespaces(&rec.vn, &rec.id) {
            let mut script = String::new();
            script.push_str(&render::vn_table(&table, site));
            script.push_str(&render::sg_chains(
                &table,
                &rec.id,
                &rec.ingress,
                &rec.egress,
            ));
            cmd::nft(&ns, &script).await?;
        }
        Ok(())
    }

    pub(crate) async fn delete_security_group(
        &mut self,
        r: DeleteSecurityGroupRequest,
    ) -> Result<(), OpError> {
        let Some(g) = self.model.sgs.get(&r.security_group_id).cloned() else {
            return Ok(());
        };
        checks::security_group_in(&g.id, &g.vn, &r.virtual_network_id)?;
        let users: Vec<&str> = self
            .model
            .ports
            .values()
            .filter(|p| p.sgs.contains(&g.id))
            .map(|p| p.id.as_str())
            .collect();
        checks::security_group_unused(&g.id, users.len(), users.first().copied().unwrap_or(""))?;
        let table = names::vn_table(&g.vn);
        let router = names::router_ns(&g.vn);
        if cmd::netns_exists(&router).await? {
            let mut script = render::vn_table(&table, TableSite::Router);
            script.push_str(&render::delete_sg_chains(&table, &g.id));
            cmd::nft(&router, &script).await?;
        }
        self.store
            .forget(kind::SG, &mut self.model.sgs, &g.id)
            .await?;
        Ok(())
    }
}
