//! NATGateway: once its VirtualNetwork is READY and its ExternalIP ALLOCATED, the fabric SNATs
//! the VN's CIDRs to the external address.

use ipnet::IpNet;
use osac_backends::{CreateNatGatewayRequest, DeleteNatGatewayRequest};
use osac_model::pb;
use osac_store::Record;

use super::external_ip::allocated_address;
use super::finalizer::{self, Cleanup};
use super::virtual_network::{undo_in_network, vn_state};
use super::{
    Action, Object, ReconcileCtx, ReconcileError, cidrs, decode, describe, failed_dependency,
    op_failed, settled, succeeded, waiting,
};

super::object!(pb::NatGateway, pb::NatGatewayStatus,
    pending: pb::NatGatewayState::Pending, ready: pb::NatGatewayState::Ready,
    failed: pb::NatGatewayState::Failed, deleting: pb::NatGatewayState::Deleting,
    delete_failed: None);

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    finalizer::reconcile(ctx, rec, |rec| apply(ctx, rec), |rec| cleanup(ctx, rec)).await
}

/// The fabric removes the SNAT.
async fn cleanup(ctx: &ReconcileCtx, rec: Record) -> Result<Cleanup, ReconcileError> {
    let nat_gateway_id = rec.id.clone();
    undo_in_network::<pb::NatGateway, _, _>(ctx, rec, |fabric, virtual_network_id| async move {
        let request = DeleteNatGatewayRequest {
            nat_gateway_id,
            virtual_network_id,
        };
        fabric.delete_nat_gateway(&request).await
    })
    .await
}

/// Once both preconditions hold, the fabric SNATs the VirtualNetwork's CIDRs to the address.
async fn apply(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let mut nat: pb::NatGateway = decode(&rec)?;
    let spec = nat.spec.clone().unwrap_or_default();
    if settled(&rec, &nat) {
        return Ok(Action::Done);
    }
    // Check both preconditions so the message names everything we wait for.
    let mut waits = Vec::new();
    let vn = ctx.store.get(&spec.virtual_network).await?;
    let eip = ctx.store.get(&spec.external_ip).await?;
    if let Some(e) = vn.iter().chain(eip.iter()).find_map(failed_dependency) {
        return op_failed(ctx, &rec, nat, e).await;
    }
    match &vn {
        None => waits.push(format!(
            "VirtualNetwork '{}' to exist",
            spec.virtual_network
        )),
        Some(v) if vn_state(v)? != pb::VirtualNetwork::READY => {
            waits.push(format!("{} to be READY", describe(v)));
        }
        Some(_) => {}
    }
    let address = match &eip {
        None => {
            waits.push(format!("ExternalIP '{}' to exist", spec.external_ip));
            None
        }
        Some(e) => {
            let a = allocated_address(e)?;
            if a.is_none() {
                waits.push(format!("{} to be ALLOCATED", describe(e)));
            }
            a
        }
    };
    let (Some(vn), Some(address), true) = (vn, address, waits.is_empty()) else {
        let m = format!("waiting for {}", waits.join(" and "));
        return waiting(ctx, &rec, nat, m).await;
    };
    let created = async {
        let v: pb::VirtualNetwork = vn
            .decode()
            .map_err(|e| osac_backends::OpError::permanent(e.to_string()))?;
        let vspec = v.spec.unwrap_or_default();
        let nets = cidrs("VirtualNetwork", &vspec.ipv4_cidr, &vspec.ipv6_cidr)?;
        let source_cidrs: Vec<IpNet> = nets
            .v4
            .map(IpNet::V4)
            .into_iter()
            .chain(nets.v6.map(IpNet::V6))
            .collect();
        let (_, m) = ctx
            .dispatcher
            .for_virtual_network(&*ctx.store, &vn.id)
            .await?;
        m.fabric
            .create_nat_gateway(&CreateNatGatewayRequest {
                nat_gateway_id: rec.id.clone(),
                virtual_network_id: vn.id.clone(),
                external_address: address,
                source_cidrs,
            })
            .await
    }
    .await;
    match created {
        Ok(()) => {
            nat.status.get_or_insert_with(Default::default).address = address.to_string();
            succeeded(ctx, &rec, nat).await
        }
        Err(e) => op_failed(ctx, &rec, nat, e).await,
    }
}
