//! Allowed addresses of ports (Neutron's allowed address pairs: a cluster's VIPs, which its
//! agents answer for): their security-group steering, shared by the ports that
//! claim them.

use std::collections::BTreeSet;
use std::net::IpAddr;

use osac_backends::OpError;

use super::Inner;
use osac_backends::fabric_model::NetworkAttachmentRecord;

use super::records::Placement;
use super::render;
use crate::{cmd, names};

impl Inner {
    /// The security-group state of allowed addresses `vips` in namespace `ns` (see
    /// [`render::vip_sg`]) from the ports claiming them there, leaving out attachment `except`
    /// (one being removed), plus the chains of the groups it jumps to.
    pub(crate) fn vip_script(
        &self,
        table: &str,
        vn: &str,
        ns: &str,
        vips: &[IpAddr],
        except: &str,
    ) -> String {
        let mut groups = BTreeSet::new();
        let mut steering = String::new();
        for vip in vips {
            let claim = self.model.claimant_groups(vn, ns, *vip, except);
            steering.push_str(&render::vip_sg(table, *vip, claim.as_deref()));
            groups.extend(claim.unwrap_or_default());
        }
        let mut script = String::new();
        for g in &groups {
            if let Some(g) = self.model.state.sg(g) {
                script.push_str(&render::sg_chains(
                    table,
                    &g.security_group_id,
                    &g.ingress,
                    &g.egress,
                ));
            }
        }
        script.push_str(&steering);
        script
    }

    /// Re-steers allowed addresses `vips` that port `p` no longer claims, from the remaining
    /// claimants in its namespace (nothing to do when the namespace is gone: a rebuild starts
    /// from the records).
    pub(crate) async fn withdraw_vips(
        &self,
        p: &NetworkAttachmentRecord,
        vips: &[IpAddr],
    ) -> Result<(), OpError> {
        let ns = p.switch_ns();
        if vips.is_empty() || !cmd::netns_exists(&ns).await? {
            return Ok(());
        }
        let vn = &p.virtual_network_id;
        let table = names::vn_table(vn);
        let mut script = render::vn_table(&table, p.table_site());
        script.push_str(&self.vip_script(&table, vn, &ns, vips, &p.attachment_id));
        cmd::nft_converge(&ns, &script).await?;
        Ok(())
    }
}
