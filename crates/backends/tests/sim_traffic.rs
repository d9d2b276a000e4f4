//! The sim fabric's traffic model: counters per NAT path that tests drive, resets, and what a
//! manager that has no counters answers.

use std::net::IpAddr;
use std::sync::Arc;

use osac_backends::*;

type Fabric = Arc<dyn FabricManager>;

async fn setup() -> (Arc<SimFabric>, Fabric) {
    let fabric = SimFabric::open(Arc::new(MemorySimState::new()))
        .await
        .unwrap();
    let c: Fabric = Arc::new(
        SimManager::fabric(Registration::sim("sim", Role::Fabric), fabric.clone()).unwrap(),
    );
    c.create_virtual_network(&CreateVirtualNetworkRequest {
        virtual_network_id: "vn".into(),
        tenant: "t".into(),
        ipv4_cidr: Some("10.0.0.0/16".parse().unwrap()),
        ipv6_cidr: None,
    })
    .await
    .unwrap();
    (fabric, c)
}

async fn address(c: &Fabric, id: &str) -> IpAddr {
    c.allocate_external_ip(&AllocateExternalIpRequest {
        external_ip_id: id.into(),
        pool_id: "pool".into(),
        cidrs: vec!["203.0.113.0/24".parse().unwrap()],
    })
    .await
    .unwrap()
    .address
}

async fn dnat(c: &Fabric, id: &str, external: IpAddr) {
    c.create_external_ip_attachment(&CreateExternalIpAttachmentRequest {
        attachment_id: id.into(),
        virtual_network_id: "vn".into(),
        external_address: external,
        target_ip: "10.0.1.5".parse().unwrap(),
    })
    .await
    .unwrap();
}

fn reading(counters: &[NatPathCounter], id: &str) -> Option<(u64, u64, String)> {
    counters
        .iter()
        .find(|c| c.object_id == id)
        .map(|c| (c.ingress_bytes, c.egress_bytes, c.epoch.clone()))
}

#[tokio::test]
async fn counters_follow_injected_traffic_resets_and_removed_paths() {
    let (fabric, c) = setup().await;
    let a = address(&c, "e1").await;
    let b = address(&c, "e2").await;
    dnat(&c, "att", a).await;
    c.create_nat_gateway(&CreateNatGatewayRequest {
        nat_gateway_id: "gw".into(),
        virtual_network_id: "vn".into(),
        external_address: b,
        source_cidrs: vec![],
    })
    .await
    .unwrap();

    // A new path counts from zero; traffic only reaches a path that exists.
    let first = c.nat_counters().await.unwrap().unwrap();
    assert_eq!(first.len(), 2);
    assert_eq!(reading(&first, "att"), Some((0, 0, "0".into())));
    assert!(fabric.inject_traffic(NatPathKind::ExternalIpAttachment, "att", 1000, 10));
    assert!(fabric.inject_traffic(NatPathKind::NatGateway, "gw", 20, 2000));
    assert!(fabric.inject_traffic(NatPathKind::ExternalIpAttachment, "att", 500, 5));
    assert!(!fabric.inject_traffic(NatPathKind::NatGateway, "att", 1, 1));
    assert!(!fabric.inject_traffic(NatPathKind::ExternalIpAttachment, "nope", 1, 1));
    let now = c.nat_counters().await.unwrap().unwrap();
    assert_eq!(reading(&now, "att"), Some((1500, 15, "0".into())));
    let gw = now.iter().find(|c| c.object_id == "gw").unwrap();
    assert_eq!(gw.kind, NatPathKind::NatGateway);
    assert_eq!((gw.ingress_bytes, gw.egress_bytes), (20, 2000));

    // A rebuild: every counter starts again from zero under a new epoch.
    fabric.reset_counters();
    assert!(fabric.inject_traffic(NatPathKind::ExternalIpAttachment, "att", 7, 0));
    let after = c.nat_counters().await.unwrap().unwrap();
    assert_eq!(reading(&after, "att"), Some((7, 0, "1".into())));
    assert_eq!(reading(&after, "gw"), Some((0, 0, "1".into())));

    // A removed path loses its counter; created again, it counts from zero.
    c.delete_external_ip_attachment(&DeleteExternalIpAttachmentRequest {
        attachment_id: "att".into(),
        virtual_network_id: "vn".into(),
    })
    .await
    .unwrap();
    let gone = c.nat_counters().await.unwrap().unwrap();
    assert_eq!(reading(&gone, "att"), None);
    dnat(&c, "att", a).await;
    let again = c.nat_counters().await.unwrap().unwrap();
    assert_eq!(reading(&again, "att"), Some((0, 0, "1".into())));
}

/// A wrapper built as a layer (the exec driver, test doubles) has no counters unless it says
/// so: the contract's default.
#[tokio::test]
async fn a_driver_without_counters_says_so() {
    let reg = Registration::sim("x", Role::Fabric);
    struct NoCounters(Registration);
    #[async_trait::async_trait]
    impl FabricLayer for NoCounters {
        fn registration(&self) -> &Registration {
            &self.0
        }
        async fn call<R: FabricRequest>(&self, _: &R) -> Result<R::Response, OpError> {
            Err(OpError::permanent("unused"))
        }
    }
    let m: Arc<dyn FabricManager> = Arc::new(NoCounters(reg));
    assert_eq!(m.nat_counters().await.unwrap(), None);
}
