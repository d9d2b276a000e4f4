//! The fabric manager contract of the `ovn` driver: each operation's plan on the fabric model
//! and what it writes to the northbound database besides its records.

use std::collections::BTreeSet;

use async_trait::async_trait;
use osac_backends::fabric_model::{
    Record, external_ip, external_ip_attachment, nat_gateway, network_attachment, security_group,
    subnet, virtual_network,
};
use osac_backends::types::*;
use osac_backends::{FabricManager, OpError, Registration};

use super::{OvnFabric, Writes, recorded, rendered, replaced_record, rows};
use crate::render::external;
use crate::render::{dhcp4_key, dhcp4_secondary_key, dhcp6_key, gateway_key, port, router_key};
use crate::render::{security, switch_key};

#[async_trait]
impl FabricManager for OvnFabric {
    fn registration(&self) -> &Registration {
        &self.registration
    }

    fn drift_check_interval(&self) -> Option<std::time::Duration> {
        let seconds = self.settings.resync_seconds;
        (seconds > 0).then(|| std::time::Duration::from_secs(seconds))
    }

    async fn repair_drift(&self) -> Result<DriftRepair, OpError> {
        let changes = self.resync().await?;
        Ok(DriftRepair {
            recreated: changes.inserted,
            reset: changes.updated,
            removed: changes.deleted,
        })
    }

    async fn create_virtual_network(
        &self,
        req: &CreateVirtualNetworkRequest,
    ) -> Result<(), OpError> {
        let id = req.virtual_network_id.clone();
        {
            let mut inner = self.inner.lock().await;
            if inner.state.vn(&id).is_none() && !inner.transit.contains_key(&id) {
                let transit = self.pick_transit(&inner)?;
                inner.transit.insert(id.clone(), transit);
            }
        }
        self.run(
            |s| virtual_network::create(s, req.clone()),
            |me, inner, _| Ok(Writes::rows(me.vn_rows(inner, &id)?)),
        )
        .await
    }

    async fn delete_virtual_network(
        &self,
        req: &DeleteVirtualNetworkRequest,
    ) -> Result<(), OpError> {
        let id = &req.virtual_network_id;
        let provider = external::provider_switch_key(&self.provider.network_name);
        self.run(
            |s| virtual_network::delete(s, req.clone()),
            |_, _, _| {
                Ok(Writes {
                    detach: vec![(
                        "Logical_Switch",
                        provider,
                        "ports",
                        "Logical_Switch_Port",
                        format!("uplink-port:{id}"),
                    )],
                    delete: BTreeSet::from([
                        ("Logical_Router", router_key(id)),
                        ("Port_Group", security::network_port_group_key(id)),
                        ("Port_Group", external::uplink_guard_key(id)),
                    ]),
                    ..Writes::default()
                })
            },
        )
        .await
    }

    async fn create_subnet(
        &self,
        req: &CreateSubnetRequest,
    ) -> Result<CreateSubnetResponse, OpError> {
        self.run(
            |s| subnet::create(s, req.clone()),
            |_, inner, _| {
                let s = inner.state.subnet(&req.subnet_id);
                rendered(
                    &inner.state,
                    s,
                    "subnet",
                    |s| &s.virtual_network_id,
                    rows::subnet,
                )
            },
        )
        .await
    }

    async fn delete_subnet(&self, req: &DeleteSubnetRequest) -> Result<(), OpError> {
        let (s, vn) = (&req.subnet_id, &req.virtual_network_id);
        self.run(
            |state| subnet::delete(state, req.clone()),
            |_, _, _| {
                Ok(Writes {
                    detach: vec![(
                        "Logical_Router",
                        router_key(vn),
                        "ports",
                        "Logical_Router_Port",
                        gateway_key(s),
                    )],
                    delete: BTreeSet::from([
                        ("Logical_Switch", switch_key(s)),
                        ("DHCP_Options", dhcp4_key(s)),
                        ("DHCP_Options", dhcp4_secondary_key(s)),
                        ("DHCP_Options", dhcp6_key(s)),
                    ]),
                    ..Writes::default()
                })
            },
        )
        .await
    }

    async fn apply_security_group(&self, req: &ApplySecurityGroupRequest) -> Result<(), OpError> {
        self.run(
            |s| security_group::apply(s, req.clone()),
            |_, inner, _| {
                let g = inner.state.sg(&req.security_group_id);
                rendered(
                    &inner.state,
                    g,
                    "security group",
                    |g| &g.virtual_network_id,
                    |g, t| vec![rows::security_group(g, t)],
                )
            },
        )
        .await
    }

    async fn delete_security_group(&self, req: &DeleteSecurityGroupRequest) -> Result<(), OpError> {
        let g = &req.security_group_id;
        self.run(
            |s| security_group::delete(s, req.clone()),
            |_, _, _| {
                Ok(Writes {
                    delete: BTreeSet::from([("Port_Group", security::security_group_key(g))]),
                    ..Writes::default()
                })
            },
        )
        .await
    }

    async fn allocate_external_ip(
        &self,
        req: &AllocateExternalIpRequest,
    ) -> Result<AllocateExternalIpResponse, OpError> {
        self.run(
            |s| external_ip::allocate(s, req.clone()),
            |_, _, _| Ok(Writes::default()),
        )
        .await
    }

    async fn release_external_ip(&self, req: &ReleaseExternalIpRequest) -> Result<(), OpError> {
        self.run(
            |s| external_ip::release(s, req.clone()),
            |_, _, _| Ok(Writes::default()),
        )
        .await
    }

    async fn create_external_ip_attachment(
        &self,
        req: &CreateExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        self.run(
            |s| external_ip_attachment::create(s, req.clone()),
            |me, inner, _| {
                let d = inner.state.dnat(&req.attachment_id);
                let mut writes = rendered(
                    &inner.state,
                    d,
                    "attachment",
                    |d| &d.virtual_network_id,
                    |d, t| vec![rows::external_ip_attachment(d, t)],
                )?;
                if me.guard_covers(inner, &req.virtual_network_id, req.external_address) {
                    writes
                        .rows
                        .push(me.vn_guard(inner, &req.virtual_network_id)?);
                }
                Ok(writes)
            },
        )
        .await
    }

    async fn delete_external_ip_attachment(
        &self,
        req: &DeleteExternalIpAttachmentRequest,
    ) -> Result<(), OpError> {
        let id = &req.attachment_id;
        self.run(
            |s| external_ip_attachment::delete(s, req.clone()),
            |me, inner, before| {
                let Some(Record::Dnat(d)) = replaced_record(before) else {
                    return Ok(Writes::default());
                };
                let mut writes = Writes::detach(
                    ("Logical_Router", router_key(&d.virtual_network_id)),
                    "nat",
                    ("NAT", external::external_ip_attachment_key(id)),
                );
                if me.guard_covers(inner, &d.virtual_network_id, d.external_address) {
                    writes.rows.push(me.vn_guard(inner, &d.virtual_network_id)?);
                }
                Ok(writes)
            },
        )
        .await
    }

    async fn create_nat_gateway(&self, req: &CreateNatGatewayRequest) -> Result<(), OpError> {
        self.run(
            |s| nat_gateway::create(s, req.clone()),
            |me, inner, _| Ok(Writes::rows(me.vn_rows(inner, &req.virtual_network_id)?)),
        )
        .await
    }

    async fn delete_nat_gateway(&self, req: &DeleteNatGatewayRequest) -> Result<(), OpError> {
        self.run(
            |s| nat_gateway::delete(s, req.clone()),
            |me, inner, before| {
                let Some(Record::Snat(n)) = replaced_record(before) else {
                    return Ok(Writes::default());
                };
                // Egress goes back to the uplink's transit address.
                Ok(Writes::rows(me.vn_rows(inner, &n.virtual_network_id)?))
            },
        )
        .await
    }

    async fn create_network_attachment(
        &self,
        req: &CreateNetworkAttachmentRequest,
    ) -> Result<PortAddresses, OpError> {
        self.run(
            |s| network_attachment::create(s, req.clone()),
            |me, inner, _| {
                let a = recorded(inner.state.attachment(&req.attachment_id), "attachment")?;
                let tenant = rows::tenant_of(&inner.state, &a.virtual_network_id);
                let chassis = me.settings.chassis_for(&a.host, &a.interface);
                Ok(Writes::rows(vec![rows::network_attachment(
                    a, tenant, &chassis,
                )]))
            },
        )
        .await
    }

    async fn delete_network_attachment(
        &self,
        req: &DeleteNetworkAttachmentRequest,
    ) -> Result<(), OpError> {
        let id = &req.attachment_id;
        self.run(
            |s| network_attachment::delete(s, req.clone()),
            |_, _, before| {
                let Some(Record::Attachment(a)) = replaced_record(before) else {
                    return Ok(Writes::default());
                };
                Ok(Writes::detach(
                    ("Logical_Switch", switch_key(&a.subnet_id)),
                    "ports",
                    ("Logical_Switch_Port", port::port_key(id)),
                ))
            },
        )
        .await
    }

    /// OVN's own DHCP server hands out exactly the port's reserved addresses (its `addresses`
    /// column), so the reservation is the lease.
    async fn query_dhcp_lease(
        &self,
        req: &QueryDhcpLeaseRequest,
    ) -> Result<PortAddresses, OpError> {
        let inner = self.inner.lock().await;
        network_attachment::query_dhcp_lease(&inner.state, req.clone()).map(|(_, lease)| lease)
    }
}
