//! gRPC on the same port as REST: tonic clients, status codes, reflection.

use std::time::Instant;

use osac_proto::admin::v1 as admin;
use osac_proto::v1 as pb;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

use crate::common::*;

#[derive(Clone)]
pub(crate) struct Bearer(pub(crate) Option<String>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(t) = &self.0 {
            req.metadata_mut().insert(
                "authorization",
                format!("Bearer {t}").parse().expect("header"),
            );
        }
        Ok(req)
    }
}

type Authed = InterceptedService<Channel, Bearer>;

pub(crate) async fn channel(s: &TestServer) -> Channel {
    Channel::from_shared(s.url())
        .expect("uri")
        .connect()
        .await
        .expect("connect")
}

fn meta(name: &str) -> Option<pb::Metadata> {
    Some(pb::Metadata {
        name: name.into(),
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_services() {
    let s = TestServer::sqlite().await;
    let ch = channel(&s).await;
    let admin_token = s.admin.token.clone();

    // Admin services: create a tenant and mint a token over gRPC.
    let mut tenants = admin::tenants_client::TenantsClient::with_interceptor(
        ch.clone(),
        Bearer(admin_token.clone()),
    );
    let tenant = tenants
        .create(pb::Tenant {
            metadata: meta("acme"),
            ..Default::default()
        })
        .await
        .expect("tenant")
        .into_inner();
    assert_eq!(tenant.metadata.as_ref().unwrap().name, "acme");
    let mut tokens = admin::tokens_client::TokensClient::with_interceptor(
        ch.clone(),
        Bearer(admin_token.clone()),
    );
    let token = tokens
        .create(admin::CreateTokenRequest {
            tenant: "acme".into(),
            role: "tenant-admin".into(),
            subject: "grpc-user".into(),
            ..Default::default()
        })
        .await
        .expect("token")
        .into_inner()
        .token;
    // List and revoke over gRPC too: the list never carries secrets.
    let temp = tokens
        .create(admin::CreateTokenRequest {
            tenant: "acme".into(),
            role: "tenant-user".into(),
            subject: "grpc-temp".into(),
            expires_in: "24h".into(),
            ..Default::default()
        })
        .await
        .expect("temporary token")
        .into_inner();
    assert_eq!(
        (temp.tenant.as_str(), temp.role.as_str()),
        ("acme", "tenant-user")
    );
    assert!(!temp.expires.is_empty());
    let listed = tokens
        .list(admin::ListTokensRequest {})
        .await
        .expect("list tokens")
        .into_inner();
    assert!(
        listed
            .items
            .iter()
            .any(|t| t.id == temp.id && t.subject == "grpc-temp")
    );
    assert!(
        !format!("{listed:?}").contains(&temp.token),
        "no secret in the list"
    );
    tokens
        .delete(admin::DeleteTokenRequest {
            id: temp.id.clone(),
            force: false,
        })
        .await
        .expect("revoke");
    let listed = tokens
        .list(admin::ListTokensRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(!listed.items.iter().any(|t| t.id == temp.id));
    let mut classes = admin::network_classes_client::NetworkClassesClient::with_interceptor(
        ch.clone(),
        Bearer(admin_token.clone()),
    );
    let list = classes
        .list(pb::ListRequest::default())
        .await
        .expect("classes")
        .into_inner();
    assert_eq!((list.size, list.total), (1, 1));
    assert_eq!(
        list.items[0].fabric_manager, "sim-fabric",
        "the admin view shows managers"
    );
    let got = classes
        .get(pb::GetRequest {
            id: "default".into(),
        })
        .await
        .expect("get by name")
        .into_inner();
    assert_eq!(got.id, list.items[0].id);
    let err = classes
        .create(pb::NetworkClass {
            metadata: meta("bad"),
            fabric_manager: "nope".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");

    let user: Bearer = Bearer(Some(token.clone()));
    let mut vns: pb::virtual_networks_client::VirtualNetworksClient<Authed> =
        pb::virtual_networks_client::VirtualNetworksClient::with_interceptor(
            ch.clone(),
            user.clone(),
        );
    let mut subnets = pb::subnets_client::SubnetsClient::with_interceptor(ch.clone(), user.clone());

    // Create / get / list / update / delete a VirtualNetwork.
    let vn = vns
        .create(pb::VirtualNetwork {
            metadata: meta("net"),
            spec: Some(pb::VirtualNetworkSpec {
                ipv4_cidr: "10.0.0.0/16".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("create VN")
        .into_inner();
    assert_eq!(vn.metadata.as_ref().unwrap().tenant, "acme");
    assert_eq!(vn.metadata.as_ref().unwrap().creator, "grpc-user");
    assert_eq!(
        vn.status.as_ref().unwrap().state,
        pb::VirtualNetworkState::Pending as i32
    );
    let start = Instant::now();
    let vn = loop {
        let v = vns
            .get(pb::GetRequest { id: vn.id.clone() })
            .await
            .expect("get")
            .into_inner();
        if v.status.as_ref().unwrap().state == pb::VirtualNetworkState::Ready as i32 {
            break v;
        }
        assert!(start.elapsed() < WAIT, "VN not READY: {v:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(vn.metadata.as_ref().unwrap().creation_timestamp.is_some());
    let list = vns
        .list(pb::ListRequest {
            filter: "this.metadata.name == \"net\"".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((list.size, list.total), (1, 1));
    assert_eq!(list.items[0].id, vn.id);
    let mut changed = vn.clone();
    changed
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .insert("env".into(), "prod".into());
    let updated = vns
        .update(pb::VirtualNetworkUpdateRequest {
            object: Some(changed.clone()),
            update_mask: String::new(),
            lock: true,
        })
        .await
        .expect("update")
        .into_inner();
    assert_eq!(updated.metadata.as_ref().unwrap().labels["env"], "prod");
    assert!(updated.metadata.as_ref().unwrap().version > vn.metadata.as_ref().unwrap().version);
    // Stale version with lock ⇒ ABORTED; immutable field ⇒ INVALID_ARGUMENT.
    let err = vns
        .update(pb::VirtualNetworkUpdateRequest {
            object: Some(changed.clone()),
            update_mask: String::new(),
            lock: true,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Aborted, "{err:?}");
    let mut cidr = updated.clone();
    cidr.spec.as_mut().unwrap().ipv4_cidr = "10.9.0.0/16".into();
    let err = vns
        .update(pb::VirtualNetworkUpdateRequest {
            object: Some(cidr),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("spec.ipv4_cidr"),
        "{}",
        err.message()
    );
    let err = vns
        .update(pb::VirtualNetworkUpdateRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    // Subnets: by VN name, READY, overlap refused, delete.
    let sn = subnets
        .create(pb::Subnet {
            metadata: meta("a"),
            spec: Some(pb::SubnetSpec {
                virtual_network: "net".into(),
                ipv4_cidr: "10.0.1.0/24".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("create subnet")
        .into_inner();
    assert_eq!(sn.spec.as_ref().unwrap().virtual_network, vn.id);
    let err = subnets
        .create(pb::Subnet {
            metadata: meta("b"),
            spec: Some(pb::SubnetSpec {
                virtual_network: "net".into(),
                ipv4_cidr: "10.0.1.0/25".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("overlaps with existing subnet 'a'"),
        "{}",
        err.message()
    );
    let err = subnets
        .create(pb::Subnet {
            spec: Some(pb::SubnetSpec {
                virtual_network: "net".into(),
                ipv4_cidr: "10.0.300.0/24".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("spec.ipv4_cidr"));
    let start = Instant::now();
    loop {
        let v = subnets
            .get(pb::GetRequest { id: "a".into() })
            .await
            .expect("get")
            .into_inner();
        if v.status.as_ref().unwrap().state == pb::SubnetState::Ready as i32 {
            assert_eq!(v.status.as_ref().unwrap().ipv4_gateway, "10.0.1.1");
            break;
        }
        assert!(start.elapsed() < WAIT, "subnet not READY: {v:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let list = subnets
        .list(pb::ListRequest {
            limit: 10,
            filter: NOT_DEFAULT.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.total, 1);
    let err = vns
        .delete(pb::DeleteRequest { id: "net".into() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("Subnet 'a'"));
    subnets
        .delete(pb::DeleteRequest { id: sn.id.clone() })
        .await
        .expect("delete subnet");
    let start = Instant::now();
    loop {
        match subnets.get(pb::GetRequest { id: sn.id.clone() }).await {
            Err(e) if e.code() == Code::NotFound => break,
            r => assert!(start.elapsed() < WAIT, "subnet not gone: {r:?}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // Error codes: NOT_FOUND, UNAUTHENTICATED, PERMISSION_DENIED.
    let err = vns
        .get(pb::GetRequest { id: "ghost".into() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().contains("ghost"));
    let mut anon = pb::virtual_networks_client::VirtualNetworksClient::with_interceptor(
        ch.clone(),
        Bearer(None),
    );
    let err = anon.list(pb::ListRequest::default()).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let mut forged = pb::virtual_networks_client::VirtualNetworksClient::with_interceptor(
        ch.clone(),
        Bearer(Some("forged".into())),
    );
    assert_eq!(
        forged
            .list(pb::ListRequest::default())
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    let mut tenant_on_admin =
        admin::tenants_client::TenantsClient::with_interceptor(ch.clone(), user.clone());
    assert_eq!(
        tenant_on_admin
            .list(pb::ListRequest::default())
            .await
            .unwrap_err()
            .code(),
        Code::PermissionDenied
    );
    let err = vns
        .list(pb::ListRequest {
            filter: "this.metadata.name ==".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("position"), "{}", err.message());

    // The public read-only views over gRPC: pools trimmed, classes without managers.
    let mut pools = pb::external_ip_pools_client::ExternalIpPoolsClient::with_interceptor(
        ch.clone(),
        user.clone(),
    );
    let p = pools
        .list(pb::ListRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(p.total, 1);
    assert!(
        p.items[0].spec.as_ref().unwrap().cidrs.is_empty(),
        "CIDRs are not shown to tenants"
    );
    let mut pub_classes = pb::network_classes_client::NetworkClassesClient::with_interceptor(
        ch.clone(),
        user.clone(),
    );
    let c = pub_classes
        .get(pb::GetRequest {
            id: "default".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        c.fabric_manager.is_empty() && c.k8s_manager.is_empty(),
        "{c:?}"
    );

    vns.delete(pb::DeleteRequest { id: "net".into() })
        .await
        .expect("delete VN");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_reflection_lists_the_services() {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let s = TestServer::sqlite().await;
    let mut client = ServerReflectionClient::new(channel(&s).await);
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = client
        .server_reflection_info(futures::stream::iter(vec![req]))
        .await
        .expect("reflection")
        .into_inner();
    let resp = stream
        .message()
        .await
        .expect("message")
        .expect("one response");
    let Some(MessageResponse::ListServicesResponse(list)) = resp.message_response else {
        panic!("unexpected {resp:?}")
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for expected in [
        "osacnet.v1.VirtualNetworks",
        "osacnet.v1.Subnets",
        "osacnet.v1.SecurityGroups",
        "osacnet.v1.ExternalIPs",
        "osacnet.v1.ExternalIPAttachments",
        "osacnet.v1.NATGateways",
        "osacnet.v1.ExternalIPPools",
        "osacnet.v1.NetworkClasses",
        "osacnet.v1.HostTypes",
        "osacnet.v1.BareMetalTemplates",
        "osacnet.admin.v1.NetworkClasses",
        "osacnet.admin.v1.BareMetalTemplates",
        "osacnet.admin.v1.Tenants",
        "osacnet.admin.v1.Tokens",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    // A symbol lookup answers with a descriptor.
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol(
            "osacnet.v1.Subnets".into(),
        )),
    };
    let mut stream = client
        .server_reflection_info(futures::stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let resp = stream.message().await.unwrap().unwrap();
    assert!(
        matches!(resp.message_response, Some(MessageResponse::FileDescriptorResponse(ref f)) if !f.file_descriptor_proto.is_empty())
    );
    // An unknown gRPC method is UNIMPLEMENTED, not a REST 404.
    let mut grpc = tonic::client::Grpc::new(channel(&s).await);
    grpc.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/osacnet.v1.Nothing/List");
    let codec = tonic_prost::ProstCodec::<pb::ListRequest, pb::ListRequest>::default();
    let err = grpc
        .unary(Request::new(pb::ListRequest::default()), path, codec)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_baremetal_templates() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    let ch = channel(&s).await;
    let mut admin_templates =
        admin::bare_metal_templates_client::BareMetalTemplatesClient::with_interceptor(
            ch.clone(),
            Bearer(s.admin.token.clone()),
        );
    let created = admin_templates
        .create(pb::BareMetalTemplate {
            metadata: meta("gold_1"),
            spec: Some(pb::BareMetalTemplateSpec {
                host_type: "bm-standard".into(),
                title: "Gold".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("create")
        .into_inner();
    let ht = id(&s
        .admin
        .get(&format!("{PRIV}/host_types/bm-standard"))
        .await
        .ok());
    assert_eq!(created.spec.as_ref().map(|s| s.host_type.clone()), Some(ht));
    let err = admin_templates
        .create(pb::BareMetalTemplate {
            metadata: meta("nothing"),
            ..Default::default()
        })
        .await
        .expect_err("no host type");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("spec.host_type"), "{err:?}");
    // Tenants list them on the public service (read-only: it has no Create).
    let mut templates = pb::bare_metal_templates_client::BareMetalTemplatesClient::with_interceptor(
        ch.clone(),
        Bearer(t.token.clone()),
    );
    let list = templates
        .list(pb::ListRequest::default())
        .await
        .expect("list")
        .into_inner();
    let names: Vec<String> = list
        .items
        .iter()
        .filter_map(|i| i.metadata.as_ref().map(|m| m.name.clone()))
        .collect();
    assert!(names.contains(&"bcm_h100".to_string()), "{names:?}");
    assert!(names.contains(&"gold_1".to_string()), "{names:?}");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_workload_services() {
    let s = TestServer::sqlite().await;
    let t = s.tenant("acme").await;
    t.ready_vn("net", "10.0.0.0/16").await;
    let subnet = t.ready_subnet("a", "net", "10.0.1.0/24").await;
    let ch = channel(&s).await;
    let admin = Bearer(s.admin.token.clone());
    let user = Bearer(t.token.clone());

    // Hosts are on the admin surface only.
    let mut hosts = admin::hosts_client::HostsClient::with_interceptor(ch.clone(), admin.clone());
    let list = hosts
        .list(pb::ListRequest::default())
        .await
        .expect("hosts")
        .into_inner();
    assert_eq!((list.size, list.total), (10, 10));
    let h = hosts
        .get(pb::GetRequest {
            id: "caas-0".into(),
        })
        .await
        .expect("host")
        .into_inner();
    assert_eq!(h.spec.as_ref().unwrap().pool, "caas");
    let mut changed = h.clone();
    changed
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .insert("rack".into(), "r1".into());
    let up = hosts
        .update(admin::HostUpdateRequest {
            object: Some(changed),
            update_mask: String::new(),
            lock: true,
        })
        .await
        .expect("update host")
        .into_inner();
    assert_eq!(up.metadata.unwrap().labels["rack"], "r1");
    let mut as_tenant =
        admin::hosts_client::HostsClient::with_interceptor(ch.clone(), user.clone());
    let err = as_tenant
        .list(pb::ListRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);

    let mut vms = pb::compute_instances_client::ComputeInstancesClient::with_interceptor(
        ch.clone(),
        user.clone(),
    );
    let vm = vms
        .create(pb::ComputeInstance {
            metadata: meta("vm"),
            spec: Some(pb::ComputeInstanceSpec {
                template: "small".into(),
                compute_network_attachments: vec![pb::ComputeNetworkAttachment {
                    subnet: "a".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("create VM")
        .into_inner();
    let att = &vm.spec.as_ref().unwrap().compute_network_attachments[0];
    assert_eq!(att.subnet, id(&subnet));
    assert!(att.primary);
    // Without attachments: the tenant's defaults, stored in the spec.
    let defaulted = vms
        .create(pb::ComputeInstance {
            metadata: meta("none"),
            ..Default::default()
        })
        .await
        .expect("create VM with defaults")
        .into_inner();
    let att = &defaulted.spec.as_ref().unwrap().compute_network_attachments[0];
    assert_ne!(att.subnet, id(&subnet));
    assert_eq!(att.security_groups.len(), 1);
    assert!(att.primary);
    let list = vms
        .list(pb::ListRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!((list.size, list.total), (2, 2));

    let mut bms = pb::bare_metal_instances_client::BareMetalInstancesClient::with_interceptor(
        ch.clone(),
        user.clone(),
    );
    let bm = bms
        .create(pb::BareMetalInstance {
            metadata: meta("bm"),
            spec: Some(pb::BareMetalInstanceSpec {
                host_type: "bm-standard".into(),
                network_attachments: vec![pb::BareMetalNetworkAttachment {
                    subnet: "a".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("create BM")
        .into_inner();
    assert_eq!(
        bm.spec.as_ref().unwrap().network_attachments[0].interface,
        "data-0"
    );
    let err = bms
        .create(pb::BareMetalInstance {
            metadata: meta("bad"),
            spec: Some(pb::BareMetalInstanceSpec {
                host_type: "ghost".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    let mut clusters = pb::clusters_client::ClustersClient::with_interceptor(ch.clone(), user);
    let mut node_sets = std::collections::HashMap::new();
    node_sets.insert(
        "workers".to_string(),
        pb::ClusterNodeSet {
            host_type: "bm-standard".into(),
            size: 1,
            ..Default::default()
        },
    );
    let c = clusters
        .create(pb::Cluster {
            metadata: meta("c"),
            spec: Some(pb::ClusterSpec {
                node_sets,
                network_attachment: Some(pb::ClusterNetworkAttachment {
                    subnet: "a".into(),
                    ..Default::default()
                }),
                auto_external_ip_attachment: true,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("a cluster with automatic external addresses")
        .into_inner();
    assert!(c.spec.as_ref().unwrap().auto_external_ip_attachment);
    let list = clusters
        .list(pb::ListRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.total, 1);
    clusters
        .delete(pb::DeleteRequest { id: c.id.clone() })
        .await
        .expect("delete cluster");
    bms.delete(pb::DeleteRequest { id: bm.id.clone() })
        .await
        .expect("delete BM");
    s.finish().await;
}
