//! Subnet: the fabric creates the segment, then (with a k8s manager) every hosting cluster gets
//! an overlay bridged into it with the VIP range reserved; READY only when all succeeded.
//! Delete runs in reverse: overlays first, then the fabric segment.

use ipnet::IpNet;
use osac_backends::{
    CreateSubnetOverlayRequest, CreateSubnetRequest, DeleteSubnetOverlayRequest,
    DeleteSubnetRequest, OpError,
};
use osac_model::pb;
use osac_store::Record;

use super::{
    Action, Object, ReconcileCtx, ReconcileError, cidrs, decode, delete_failed, describe,
    failed_dependency, finalize, has_finalizer, op_failed, settled, succeeded, vn_state, waiting,
};

super::object!(pb::Subnet, pb::SubnetStatus,
    pending: pb::SubnetState::Pending, ready: pb::SubnetState::Ready,
    failed: pb::SubnetState::Failed, deleting: pb::SubnetState::Deleting,
    delete_failed: Some(pb::SubnetState::DeleteFailed as i32));

/// Prefixes a hosting cluster's failure with its name, keeping the failure's kind.
fn on_cluster(cluster: &str, e: OpError) -> OpError {
    e.map_message(|m| format!("hosting cluster '{cluster}': {m}"))
}

pub(crate) async fn reconcile(ctx: &ReconcileCtx, rec: Record) -> Result<Action, ReconcileError> {
    let mut subnet: pb::Subnet = decode(&rec)?;
    let spec = subnet.spec.clone().unwrap_or_default();
    if rec.deleted_at.is_some() {
        if !has_finalizer(&rec) {
            return Ok(Action::Done);
        }
        return match delete(ctx, &rec.id, &spec.virtual_network).await {
            Ok(()) => finalize(ctx, &rec).await,
            Err(e) => delete_failed(ctx, &rec, subnet, e).await,
        };
    }
    if settled(&rec, &subnet) {
        return Ok(Action::Done);
    }
    let vn = ctx.store.get(&spec.virtual_network).await?;
    let Some(vn) = vn else {
        let m = format!(
            "waiting for VirtualNetwork '{}' to exist",
            spec.virtual_network
        );
        return waiting(ctx, &rec, subnet, m).await;
    };
    if let Some(e) = failed_dependency(&vn) {
        return op_failed(ctx, &rec, subnet, e).await;
    }
    if vn_state(&vn)? != pb::VirtualNetwork::READY {
        let m = format!("waiting for {} to be READY", describe(&vn));
        return waiting(ctx, &rec, subnet, m).await;
    }
    let nets = match cidrs("Subnet", &spec.ipv4_cidr, &spec.ipv6_cidr) {
        Ok(n) => n,
        Err(e) => return op_failed(ctx, &rec, subnet, e).await,
    };
    let managers = match ctx
        .dispatcher
        .for_virtual_network(&*ctx.store, &vn.id)
        .await
    {
        Ok((_, m)) => m,
        Err(e) => return op_failed(ctx, &rec, subnet, e).await,
    };
    // The VIP block exists only where a k8s manager serves cluster load balancers.
    let vip = match (&managers.k8s, nets.v4) {
        (Some(_), Some(v4)) => {
            osac_model::net::vip_block(&v4, managers.vip_prefix_length()).map(IpNet::V4)
        }
        _ => None,
    };
    let created = managers
        .fabric
        .create_subnet(&CreateSubnetRequest {
            subnet_id: rec.id.clone(),
            virtual_network_id: vn.id.clone(),
            ipv4_cidr: nets.v4,
            ipv6_cidr: nets.v6,
            vip_cidr: vip,
        })
        .await;
    let segment = match created {
        Ok(r) => r,
        Err(e) => return op_failed(ctx, &rec, subnet, e).await,
    };
    let status = subnet.status.get_or_insert_with(Default::default);
    status.segment_id = segment.segment_id;
    status.ipv4_gateway = segment
        .ipv4_gateway
        .map(|a| a.to_string())
        .unwrap_or_default();
    status.ipv6_gateway = segment
        .ipv6_gateway
        .map(|a| a.to_string())
        .unwrap_or_default();
    status.vip_cidr = vip.map(|v| v.to_string()).unwrap_or_default();
    if let Some(k8s) = &managers.k8s {
        for cluster in k8s.hosting_clusters() {
            let overlay = k8s
                .create_subnet_overlay(&CreateSubnetOverlayRequest {
                    subnet_id: rec.id.clone(),
                    segment_id: segment.segment_id,
                    hosting_cluster: cluster.clone(),
                    ipv4_cidr: nets.v4,
                    ipv6_cidr: nets.v6,
                    vip_cidr: vip,
                })
                .await;
            if let Err(e) = overlay {
                return op_failed(ctx, &rec, subnet, on_cluster(cluster, e)).await;
            }
        }
    }
    succeeded(ctx, &rec, subnet).await
}

/// Overlays on every hosting cluster, then the fabric segment.
async fn delete(ctx: &ReconcileCtx, subnet_id: &str, vn_id: &str) -> Result<(), OpError> {
    let (_, managers) = ctx
        .dispatcher
        .for_virtual_network(&*ctx.store, vn_id)
        .await?;
    if let Some(k8s) = &managers.k8s {
        for cluster in k8s.hosting_clusters() {
            k8s.delete_subnet_overlay(&DeleteSubnetOverlayRequest {
                subnet_id: subnet_id.to_string(),
                hosting_cluster: cluster.clone(),
            })
            .await
            .map_err(|e| on_cluster(cluster, e))?;
        }
    }
    managers
        .fabric
        .delete_subnet(&DeleteSubnetRequest {
            subnet_id: subnet_id.to_string(),
            virtual_network_id: vn_id.to_string(),
        })
        .await
}
