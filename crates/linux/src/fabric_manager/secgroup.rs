//! Security groups: one chain pair per group in every namespace that enforces it (the VN's
//! router, and each hosting cluster with ports of the group), replaced atomically. The script
//! stays flat in the number of groups: `cmd::nft` sends its rules in block form, for which
//! nft does not load every chain of the namespace first (see `cmd::compact`).

use osac_backends::{
    ApplySecurityGroupRequest, DeleteSecurityGroupRequest, OpError, Protocol, SecurityRule,
};

use super::records::{SgRec, kind};
use super::render::{self, TableSite};
use super::{Inner, empty, missing_vn, require_non_empty};
use crate::cmd;
use crate::names;

/// Rule validation shared with the sim's semantics.
pub(crate) fn validate_rule(rule: &SecurityRule) -> Result<(), String> {
    match rule.protocol {
        Protocol::Tcp | Protocol::Udp => match (rule.port_from, rule.port_to) {
            (None, None) => {}
            (Some(from), Some(to)) => {
                if from == 0 || from > to {
                    return Err(format!(
                        "port range {from}-{to} is invalid (1-65535, from <= to)"
                    ));
                }
            }
            _ => return Err("port_from and port_to must be given together".into()),
        },
        Protocol::Icmp | Protocol::All => {
            if rule.port_from.is_some() || rule.port_to.is_some() {
                return Err("ports are only valid for tcp and udp".into());
            }
        }
    }
    if osac_backends::net::has_host_bits(rule.cidr) {
        return Err(format!("cidr '{}' has host bits set", rule.cidr));
    }
    Ok(())
}

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
    ) -> Result<serde_json::Value, OpError> {
        require_non_empty("security_group_id", &r.security_group_id)?;
        if !self.model.vns.contains_key(&r.virtual_network_id) {
            return Err(missing_vn(&r.virtual_network_id));
        }
        if let Some(old) = self.model.sgs.get(&r.security_group_id)
            && old.vn != r.virtual_network_id
        {
            return Err(OpError::permanent(format!(
                "security group '{}' belongs to virtual network '{}'",
                r.security_group_id, old.vn
            )));
        }
        for (dir, rules) in [("ingress", &r.ingress), ("egress", &r.egress)] {
            for (i, rule) in rules.iter().enumerate() {
                validate_rule(rule)
                    .map_err(|m| OpError::permanent(format!("{dir} rule {i}: {m}")))?;
            }
        }
        let rec = SgRec {
            id: r.security_group_id,
            vn: r.virtual_network_id,
            ingress: r.ingress,
            egress: r.egress,
        };
        if self.model.sgs.get(&rec.id) != Some(&rec) {
            self.store.put(kind::SG, &rec.id, &rec).await?;
            self.model.sgs.insert(rec.id.clone(), rec.clone());
        }
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
        Ok(empty())
    }

    pub(crate) async fn delete_security_group(
        &mut self,
        r: DeleteSecurityGroupRequest,
    ) -> Result<serde_json::Value, OpError> {
        let Some(g) = self.model.sgs.get(&r.security_group_id).cloned() else {
            return Ok(empty());
        };
        if g.vn != r.virtual_network_id {
            return Err(OpError::permanent(format!(
                "security group '{}' belongs to virtual network '{}', not '{}'",
                g.id, g.vn, r.virtual_network_id
            )));
        }
        if let Some(p) = self.model.ports.values().find(|p| p.sgs.contains(&g.id)) {
            return Err(OpError::permanent(format!(
                "security group '{}' is still applied to network attachment '{}'",
                g.id, p.id
            )));
        }
        let table = names::vn_table(&g.vn);
        let router = names::router_ns(&g.vn);
        if cmd::netns_exists(&router).await? {
            let mut script = render::vn_table(&table, TableSite::Router);
            script.push_str(&render::delete_sg_chains(&table, &g.id));
            cmd::nft(&router, &script).await?;
        }
        self.model.sgs.remove(&g.id);
        self.store.delete(kind::SG, &g.id).await?;
        Ok(empty())
    }
}
