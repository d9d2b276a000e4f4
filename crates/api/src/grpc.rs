//! gRPC transport: each generated service trait is a thin adapter that hands the proto message
//! it received ([`Object`]) to the same [`Service`] the REST API uses. Replies come as messages
//! from the service (`get_message`, `list_messages`, `create_message`, `update_message`); watch
//! events are decoded from the rendered object.

use std::sync::Arc;

use osac_model::{Kind, Scope};
use osac_proto::admin::v1 as admin;
use osac_proto::v1 as pb;
use serde::de::DeserializeOwned;
use tonic::{Request, Response, Status};

use crate::auth::{Authenticated, Caller};
use crate::deprecation;
use crate::error::{ApiError, Code};
use crate::service::{ListParams, Service, UpdateOptions};
use crate::typed::Object;
use crate::watch::{WatchEvent, WatchReceiver};

/// Shared state of every gRPC service.
#[derive(Clone)]
pub struct Grpc {
    pub service: Arc<Service>,
}

impl Grpc {
    async fn caller<T>(&self, req: &Request<T>) -> Result<Caller, Status> {
        let header = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        let caller = self.service.auth.authenticate(header).await?;
        crate::access::note_subject(&caller.subject);
        Ok(caller)
    }

    /// The caller of a stream, with the credential the stream keeps checking.
    async fn authenticated<T>(&self, req: &Request<T>) -> Result<Authenticated, Status> {
        let header = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        let who = self.service.auth.authenticate_stream(header).await?;
        crate::access::note_subject(&who.caller.subject);
        Ok(who)
    }
}

fn from_value<T: DeserializeOwned>(v: serde_json::Value) -> Result<T, Status> {
    serde_json::from_value(v).map_err(|e| ApiError::new(Code::Internal, e.to_string()).into())
}

fn params(r: pb::ListRequest) -> ListParams {
    ListParams {
        offset: i64::from(r.offset),
        limit: i64::from(r.limit),
        filter: r.filter,
        order: r.order,
    }
}

/// Builds a list response from items and the total count.
trait FromParts<T> {
    fn from_parts(items: Vec<T>, total: i64) -> Self;
}

macro_rules! list_response {
    ($($list:ty => $msg:ty),* $(,)?) => {
        $(impl FromParts<$msg> for $list {
            fn from_parts(items: Vec<$msg>, total: i64) -> Self {
                Self { size: items.len() as i32, total: i32::try_from(total).unwrap_or(i32::MAX), items }
            }
        })*
    };
}

list_response!(
    pb::VirtualNetworkListResponse => pb::VirtualNetwork,
    pb::SubnetListResponse => pb::Subnet,
    pb::SecurityGroupListResponse => pb::SecurityGroup,
    pb::ExternalIpListResponse => pb::ExternalIp,
    pb::ExternalIpAttachmentListResponse => pb::ExternalIpAttachment,
    pb::NatGatewayListResponse => pb::NatGateway,
    pb::ExternalIpPoolListResponse => pb::ExternalIpPool,
    pb::NetworkClassListResponse => pb::NetworkClass,
    pb::HostTypeListResponse => pb::HostType,
    pb::BareMetalTemplateListResponse => pb::BareMetalTemplate,
    pb::BareMetalInstanceTypeListResponse => pb::BareMetalInstanceType,
    pb::EventListResponse => pb::Event,
    pb::ComputeInstanceListResponse => pb::ComputeInstance,
    pb::BareMetalInstanceListResponse => pb::BareMetalInstance,
    pb::ClusterListResponse => pb::Cluster,
    admin::HostListResponse => pb::Host,
    admin::NetworkClassListResponse => pb::NetworkClass,
    admin::ExternalIpPoolListResponse => pb::ExternalIpPool,
    admin::HostTypeListResponse => pb::HostType,
    admin::BareMetalTemplateListResponse => pb::BareMetalTemplate,
    admin::BareMetalInstanceTypeListResponse => pb::BareMetalInstanceType,
    admin::TenantListResponse => pb::Tenant,
);

/// A watch as a gRPC server stream.
type WatchStream<T> = std::pin::Pin<Box<dyn futures::Stream<Item = Result<T, Status>> + Send>>;

/// Turns a watch into a stream of proto events; an error ends the stream with its status.
fn watch_stream<T: Send + 'static>(
    rx: WatchReceiver,
    convert: fn(WatchEvent) -> Result<T, Status>,
) -> WatchStream<T> {
    Box::pin(futures::stream::unfold(rx, move |mut rx| async move {
        let item = rx.recv().await?;
        Some((item.map_err(Status::from).and_then(convert), rx))
    }))
}

/// Builds a watch event message from its type name and object.
trait FromEvent<T> {
    fn from_event(kind: String, object: T) -> Self;
}

macro_rules! watch_event {
    ($($event:ty => $msg:ty),* $(,)?) => {
        $(impl FromEvent<$msg> for $event {
            fn from_event(kind: String, object: $msg) -> Self {
                Self { r#type: kind, object: Some(object) }
            }
        })*
    };
}

watch_event!(
    pb::VirtualNetworkWatchEvent => pb::VirtualNetwork,
    pb::SubnetWatchEvent => pb::Subnet,
    pb::SecurityGroupWatchEvent => pb::SecurityGroup,
    pb::ExternalIpWatchEvent => pb::ExternalIp,
    pb::ExternalIpAttachmentWatchEvent => pb::ExternalIpAttachment,
    pb::NatGatewayWatchEvent => pb::NatGateway,
    pb::ExternalIpPoolWatchEvent => pb::ExternalIpPool,
    pb::NetworkClassWatchEvent => pb::NetworkClass,
    pb::HostTypeWatchEvent => pb::HostType,
    pb::BareMetalTemplateWatchEvent => pb::BareMetalTemplate,
    pb::BareMetalInstanceTypeWatchEvent => pb::BareMetalInstanceType,
    pb::EventWatchEvent => pb::Event,
    pb::ComputeInstanceWatchEvent => pb::ComputeInstance,
    pb::BareMetalInstanceWatchEvent => pb::BareMetalInstance,
    pb::ClusterWatchEvent => pb::Cluster,
    admin::HostWatchEvent => pb::Host,
    admin::NetworkClassWatchEvent => pb::NetworkClass,
    admin::ExternalIpPoolWatchEvent => pb::ExternalIpPool,
    admin::HostTypeWatchEvent => pb::HostType,
    admin::BareMetalTemplateWatchEvent => pb::BareMetalTemplate,
    admin::BareMetalInstanceTypeWatchEvent => pb::BareMetalInstanceType,
    admin::TenantWatchEvent => pb::Tenant,
);

macro_rules! grpc_service {
    ($name:ident, $module:ident :: $trait:ident, $kind:expr, $surface:expr, $msg:ty, $list:ty, $watch:ty $(, $upd:ty)?) => {
        /// gRPC adapter over the shared service.
        pub struct $name(pub Grpc);

        #[tonic::async_trait]
        impl $module::$trait for $name {
            async fn list(&self, req: Request<pb::ListRequest>) -> Result<Response<$list>, Status> {
                let caller = self.0.caller(&req).await?;
                let page = self.0.service.list_messages::<$msg>(&caller, $surface, $kind, params(req.into_inner())).await?;
                Ok(Response::new(<$list>::from_parts(page.items, page.total)))
            }

            type WatchStream = WatchStream<$watch>;

            async fn watch(&self, req: Request<pb::WatchRequest>) -> Result<Response<Self::WatchStream>, Status> {
                let who = self.0.authenticated(&req).await?;
                let rx = self.0.service.watch(&who, $surface, $kind, &req.into_inner().filter).await?;
                Ok(Response::new(watch_stream(rx, |event: WatchEvent| {
                    Ok(<$watch>::from_event(event.kind.as_str().to_string(), from_value::<$msg>(event.object)?))
                })))
            }

            async fn get(&self, req: Request<pb::GetRequest>) -> Result<Response<$msg>, Status> {
                let caller = self.0.caller(&req).await?;
                let id = req.into_inner().id;
                Ok(Response::new(self.0.service.get_message(&caller, $surface, $kind, &id).await?))
            }
            $(
            async fn create(&self, req: Request<$msg>) -> Result<Response<$msg>, Status> {
                let caller = self.0.caller(&req).await?;
                let obj = Object::from(req.into_inner());
                let warning = deprecation::create_warning(&obj);
                let mut response = Response::new(self.0.service.create_message(&caller, $surface, obj).await?);
                if let Some(text) = warning
                    && let Ok(value) = deprecation::warning_value(text).parse()
                {
                    response.metadata_mut().insert(deprecation::WARNING, value);
                }
                Ok(response)
            }

            async fn update(&self, req: Request<$upd>) -> Result<Response<$msg>, Status> {
                let caller = self.0.caller(&req).await?;
                let r = req.into_inner();
                let object = r.object.ok_or_else(|| Status::invalid_argument("object is required"))?;
                let key = object.id.clone();
                let mask = (!r.update_mask.is_empty()).then_some(r.update_mask.as_str());
                let how = UpdateOptions { mask, lock: r.lock };
                Ok(Response::new(self.0.service.update_message(&caller, $surface, &key, Object::from(object), how).await?))
            }

            async fn delete(&self, req: Request<pb::DeleteRequest>) -> Result<Response<pb::DeleteResponse>, Status> {
                let caller = self.0.caller(&req).await?;
                self.0.service.delete(&caller, $surface, $kind, &req.into_inner().id).await?;
                Ok(Response::new(pb::DeleteResponse {}))
            }
            )?
        }
    };
}

use admin::bare_metal_instance_types_server as a_instance_types;
use admin::bare_metal_templates_server as a_templates;
use admin::{
    external_ip_pools_server as a_pools, host_types_server as a_host_types, hosts_server,
    network_classes_server as a_classes, tenants_server, tokens_server,
};
use pb::bare_metal_instance_types_server;
use pb::bare_metal_templates_server;
use pb::{
    bare_metal_instances_server, clusters_server, compute_instances_server, events_server,
    external_i_ps_server, external_ip_attachments_server, external_ip_pools_server,
    host_types_server, nat_gateways_server, network_classes_server, security_groups_server,
    subnets_server, virtual_networks_server,
};

const PUB: Scope = Scope::Tenant;
const PRIV: Scope = Scope::Provider;

grpc_service!(
    VirtualNetworks,
    virtual_networks_server::VirtualNetworks,
    Kind::VirtualNetwork,
    PUB,
    pb::VirtualNetwork,
    pb::VirtualNetworkListResponse,
    pb::VirtualNetworkWatchEvent,
    pb::VirtualNetworkUpdateRequest
);
grpc_service!(
    Subnets,
    subnets_server::Subnets,
    Kind::Subnet,
    PUB,
    pb::Subnet,
    pb::SubnetListResponse,
    pb::SubnetWatchEvent,
    pb::SubnetUpdateRequest
);
grpc_service!(
    SecurityGroups,
    security_groups_server::SecurityGroups,
    Kind::SecurityGroup,
    PUB,
    pb::SecurityGroup,
    pb::SecurityGroupListResponse,
    pb::SecurityGroupWatchEvent,
    pb::SecurityGroupUpdateRequest
);
grpc_service!(
    ExternalIps,
    external_i_ps_server::ExternalIPs,
    Kind::ExternalIp,
    PUB,
    pb::ExternalIp,
    pb::ExternalIpListResponse,
    pb::ExternalIpWatchEvent,
    pb::ExternalIpUpdateRequest
);
grpc_service!(
    ExternalIpAttachments,
    external_ip_attachments_server::ExternalIpAttachments,
    Kind::ExternalIpAttachment,
    PUB,
    pb::ExternalIpAttachment,
    pb::ExternalIpAttachmentListResponse,
    pb::ExternalIpAttachmentWatchEvent,
    pb::ExternalIpAttachmentUpdateRequest
);
grpc_service!(
    NatGateways,
    nat_gateways_server::NatGateways,
    Kind::NatGateway,
    PUB,
    pb::NatGateway,
    pb::NatGatewayListResponse,
    pb::NatGatewayWatchEvent,
    pb::NatGatewayUpdateRequest
);
grpc_service!(
    ComputeInstances,
    compute_instances_server::ComputeInstances,
    Kind::ComputeInstance,
    PUB,
    pb::ComputeInstance,
    pb::ComputeInstanceListResponse,
    pb::ComputeInstanceWatchEvent,
    pb::ComputeInstanceUpdateRequest
);
grpc_service!(
    BareMetalInstances,
    bare_metal_instances_server::BareMetalInstances,
    Kind::BareMetalInstance,
    PUB,
    pb::BareMetalInstance,
    pb::BareMetalInstanceListResponse,
    pb::BareMetalInstanceWatchEvent,
    pb::BareMetalInstanceUpdateRequest
);
grpc_service!(
    Clusters,
    clusters_server::Clusters,
    Kind::Cluster,
    PUB,
    pb::Cluster,
    pb::ClusterListResponse,
    pb::ClusterWatchEvent,
    pb::ClusterUpdateRequest
);
grpc_service!(
    PublicPools,
    external_ip_pools_server::ExternalIpPools,
    Kind::ExternalIpPool,
    PUB,
    pb::ExternalIpPool,
    pb::ExternalIpPoolListResponse,
    pb::ExternalIpPoolWatchEvent
);
grpc_service!(
    PublicClasses,
    network_classes_server::NetworkClasses,
    Kind::NetworkClass,
    PUB,
    pb::NetworkClass,
    pb::NetworkClassListResponse,
    pb::NetworkClassWatchEvent
);
grpc_service!(
    PublicHostTypes,
    host_types_server::HostTypes,
    Kind::HostType,
    PUB,
    pb::HostType,
    pb::HostTypeListResponse,
    pb::HostTypeWatchEvent
);
grpc_service!(
    PublicTemplates,
    bare_metal_templates_server::BareMetalTemplates,
    Kind::BareMetalTemplate,
    PUB,
    pb::BareMetalTemplate,
    pb::BareMetalTemplateListResponse,
    pb::BareMetalTemplateWatchEvent
);
grpc_service!(
    PublicInstanceTypes,
    bare_metal_instance_types_server::BareMetalInstanceTypes,
    Kind::BareMetalInstanceType,
    PUB,
    pb::BareMetalInstanceType,
    pb::BareMetalInstanceTypeListResponse,
    pb::BareMetalInstanceTypeWatchEvent
);
// Events are written by the server only: List, Get and Watch.
grpc_service!(
    Events,
    events_server::Events,
    Kind::Event,
    PUB,
    pb::Event,
    pb::EventListResponse,
    pb::EventWatchEvent
);
grpc_service!(
    AdminClasses,
    a_classes::NetworkClasses,
    Kind::NetworkClass,
    PRIV,
    pb::NetworkClass,
    admin::NetworkClassListResponse,
    admin::NetworkClassWatchEvent,
    admin::NetworkClassUpdateRequest
);
grpc_service!(
    AdminPools,
    a_pools::ExternalIpPools,
    Kind::ExternalIpPool,
    PRIV,
    pb::ExternalIpPool,
    admin::ExternalIpPoolListResponse,
    admin::ExternalIpPoolWatchEvent,
    admin::ExternalIpPoolUpdateRequest
);
grpc_service!(
    AdminHostTypes,
    a_host_types::HostTypes,
    Kind::HostType,
    PRIV,
    pb::HostType,
    admin::HostTypeListResponse,
    admin::HostTypeWatchEvent,
    admin::HostTypeUpdateRequest
);
grpc_service!(
    AdminTemplates,
    a_templates::BareMetalTemplates,
    Kind::BareMetalTemplate,
    PRIV,
    pb::BareMetalTemplate,
    admin::BareMetalTemplateListResponse,
    admin::BareMetalTemplateWatchEvent,
    admin::BareMetalTemplateUpdateRequest
);
grpc_service!(
    AdminInstanceTypes,
    a_instance_types::BareMetalInstanceTypes,
    Kind::BareMetalInstanceType,
    PRIV,
    pb::BareMetalInstanceType,
    admin::BareMetalInstanceTypeListResponse,
    admin::BareMetalInstanceTypeWatchEvent,
    admin::BareMetalInstanceTypeUpdateRequest
);
grpc_service!(
    AdminHosts,
    hosts_server::Hosts,
    Kind::Host,
    PRIV,
    pb::Host,
    admin::HostListResponse,
    admin::HostWatchEvent,
    admin::HostUpdateRequest
);
grpc_service!(
    AdminTenants,
    tenants_server::Tenants,
    Kind::Tenant,
    PRIV,
    pb::Tenant,
    admin::TenantListResponse,
    admin::TenantWatchEvent,
    admin::TenantUpdateRequest
);

/// Token minting over gRPC.
pub struct Tokens(pub Grpc);

#[tonic::async_trait]
impl tokens_server::Tokens for Tokens {
    async fn create(
        &self,
        req: Request<admin::CreateTokenRequest>,
    ) -> Result<Response<admin::CreateTokenResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let r = req.into_inner();
        let minted = self
            .0
            .service
            .mint_token(
                &caller,
                crate::token_service::MintRequest {
                    tenant: r.tenant,
                    role: r.role,
                    subject: r.subject,
                    expires_in: r.expires_in,
                    expires_at: r.expires_at,
                },
            )
            .await?;
        let v = minted.view;
        Ok(Response::new(admin::CreateTokenResponse {
            token: minted.token,
            id: v.id,
            subject: v.subject,
            role: v.role.as_str().into(),
            tenant: v.tenant,
            tenant_id: v.tenant_id.unwrap_or_default(),
            created: v.created.to_rfc3339(),
            expires: v.expires.map(|e| e.to_rfc3339()).unwrap_or_default(),
        }))
    }

    async fn list(
        &self,
        req: Request<admin::ListTokensRequest>,
    ) -> Result<Response<admin::ListTokensResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let items: Vec<admin::TokenInfo> = self
            .0
            .service
            .list_tokens(&caller)
            .await?
            .into_iter()
            .map(|v| admin::TokenInfo {
                id: v.id,
                subject: v.subject,
                role: v.role.as_str().into(),
                tenant: v.tenant,
                tenant_id: v.tenant_id.unwrap_or_default(),
                created: v.created.to_rfc3339(),
                expires: v.expires.map(|e| e.to_rfc3339()).unwrap_or_default(),
            })
            .collect();
        let size = i32::try_from(items.len()).unwrap_or(i32::MAX);
        Ok(Response::new(admin::ListTokensResponse {
            size,
            total: size,
            items,
        }))
    }

    async fn delete(
        &self,
        req: Request<admin::DeleteTokenRequest>,
    ) -> Result<Response<admin::DeleteTokenResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let presented = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(crate::auth::bearer_secret)
            .map(str::to_string);
        let req = req.into_inner();
        self.0
            .service
            .revoke_token(&caller, presented.as_deref(), &req.id, req.force)
            .await?;
        Ok(Response::new(admin::DeleteTokenResponse {}))
    }
}

/// `Reachability.Explain`: tenant callers explain their own tenant; a provider admin (no
/// tenant of its own) names one in `tenant`, as on the private REST API.
pub struct Reachability(pub Grpc);

#[tonic::async_trait]
impl pb::reachability_server::Reachability for Reachability {
    async fn explain(
        &self,
        req: Request<pb::ExplainReachabilityRequest>,
    ) -> Result<Response<pb::ExplainReachabilityResponse>, Status> {
        let caller = self.0.caller(&req).await?;
        let surface = if caller.is_provider() && caller.tenant.is_none() {
            Scope::Provider
        } else {
            Scope::Tenant
        };
        let answer = self
            .0
            .service
            .explain_reachability(&caller, surface, req.get_ref())
            .await?;
        Ok(Response::new(answer))
    }
}

/// Every gRPC service plus reflection, as routes that can be merged into the HTTP router.
pub fn routes(
    service: Arc<Service>,
) -> Result<tonic::service::Routes, tonic_reflection::server::Error> {
    let g = Grpc { service };
    // Both reflection versions: `v1` for current clients, `v1alpha` for the stock Python
    // `grpcio-reflection` client and older grpcurl builds, which ask for it only.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(osac_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection().build_v1()?;
    let reflection_v1alpha = reflection().build_v1alpha()?;
    Ok(
        tonic::service::Routes::new(virtual_networks_server::VirtualNetworksServer::new(
            VirtualNetworks(g.clone()),
        ))
        .add_service(subnets_server::SubnetsServer::new(Subnets(g.clone())))
        .add_service(security_groups_server::SecurityGroupsServer::new(
            SecurityGroups(g.clone()),
        ))
        .add_service(external_i_ps_server::ExternalIPsServer::new(ExternalIps(
            g.clone(),
        )))
        .add_service(
            external_ip_attachments_server::ExternalIpAttachmentsServer::new(
                ExternalIpAttachments(g.clone()),
            ),
        )
        .add_service(nat_gateways_server::NatGatewaysServer::new(NatGateways(
            g.clone(),
        )))
        .add_service(compute_instances_server::ComputeInstancesServer::new(
            ComputeInstances(g.clone()),
        ))
        .add_service(bare_metal_instances_server::BareMetalInstancesServer::new(
            BareMetalInstances(g.clone()),
        ))
        .add_service(clusters_server::ClustersServer::new(Clusters(g.clone())))
        .add_service(external_ip_pools_server::ExternalIpPoolsServer::new(
            PublicPools(g.clone()),
        ))
        .add_service(network_classes_server::NetworkClassesServer::new(
            PublicClasses(g.clone()),
        ))
        .add_service(host_types_server::HostTypesServer::new(PublicHostTypes(
            g.clone(),
        )))
        .add_service(bare_metal_templates_server::BareMetalTemplatesServer::new(
            PublicTemplates(g.clone()),
        ))
        .add_service(
            bare_metal_instance_types_server::BareMetalInstanceTypesServer::new(
                PublicInstanceTypes(g.clone()),
            ),
        )
        .add_service(events_server::EventsServer::new(Events(g.clone())))
        .add_service(pb::reachability_server::ReachabilityServer::new(
            Reachability(g.clone()),
        ))
        .add_service(a_classes::NetworkClassesServer::new(AdminClasses(
            g.clone(),
        )))
        .add_service(a_pools::ExternalIpPoolsServer::new(AdminPools(g.clone())))
        .add_service(a_host_types::HostTypesServer::new(AdminHostTypes(
            g.clone(),
        )))
        .add_service(a_templates::BareMetalTemplatesServer::new(AdminTemplates(
            g.clone(),
        )))
        .add_service(a_instance_types::BareMetalInstanceTypesServer::new(
            AdminInstanceTypes(g.clone()),
        ))
        .add_service(hosts_server::HostsServer::new(AdminHosts(g.clone())))
        .add_service(tenants_server::TenantsServer::new(AdminTenants(g.clone())))
        .add_service(tokens_server::TokensServer::new(Tokens(g)))
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha),
    )
}
