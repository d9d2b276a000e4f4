//! Security groups: one chain pair per group in every namespace that enforces it (the VN's
//! router, and each hosting cluster with ports of the group), replaced atomically. The script
//! stays flat in the number of groups: `cmd::nft` sends its rules in block form, for which
//! nft does not load every chain of the namespace first (see `cmd::compact`).

use osac_backends::fabric_model::security_group;
use osac_backends::{ApplySecurityGroupRequest, DeleteSecurityGroupRequest, OpError};

use super::Inner;
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
        let (vn, id) = (r.virtual_network_id.clone(), r.security_group_id.clone());
        let (changes, ()) = security_group::apply(&self.model.state, r)?;
        self.commit(changes).await?;
        self.router_ready(&vn).await?;
        let Some(rec) = self.model.state.sg(&id) else {
            return Ok(());
        };
        let table = names::vn_table(&vn);
        for (ns, site) in self.sg_namespaces(&vn, &id) {
            let mut script = String::new();
            script.push_str(&render::vn_table(&table, site));
            script.push_str(&render::sg_chains(&table, &id, &rec.ingress, &rec.egress));
            cmd::nft(&ns, &script).await?;
        }
        Ok(())
    }

    pub(crate) async fn delete_security_group(
        &mut self,
        r: DeleteSecurityGroupRequest,
    ) -> Result<(), OpError> {
        let Some(g) = self.model.state.sg(&r.security_group_id).cloned() else {
            return Ok(());
        };
        let (changes, ()) = security_group::delete(&self.model.state, r)?;
        let table = names::vn_table(&g.virtual_network_id);
        let router = names::router_ns(&g.virtual_network_id);
        if cmd::netns_exists(&router).await? {
            let mut script = render::vn_table(&table, TableSite::Router);
            script.push_str(&render::delete_sg_chains(&table, &g.security_group_id));
            cmd::nft(&router, &script).await?;
        }
        self.commit(changes).await
    }
}
