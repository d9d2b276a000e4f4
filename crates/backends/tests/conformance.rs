//! The contract conformance suites, run against every driver of this build.

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use osac_backends::conformance::{
    FabricSuiteOptions, LeaseReporting, fabric_suite, fabric_suite_with, k8s_suite,
};
use osac_backends::{
    DriverConfig, DriverContext, ExecManager, FabricLayer, FabricManager, FabricRequest,
    MemorySimState, OpError, Operation, PortAddresses, Registration, Registry, Role, RoleManager,
    SimFabric, SimK8s, SimManager,
};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/managers")
}

/// The demo-exec registration from the examples, with its state in `state_dir`.
pub async fn demo_exec(state_dir: &Path) -> Arc<dyn FabricManager> {
    let reg = Registry::load_dir(&examples(), &DriverContext::in_memory())
        .await
        .unwrap();
    let mut registration: Registration = reg.check("demo-exec", Role::Fabric).unwrap().clone();
    let DriverConfig::Exec(exec) = &mut registration.driver else {
        panic!("demo-exec is not exec")
    };
    exec.env.insert(
        "OSAC_DEMO_EXEC_STATE".into(),
        state_dir.display().to_string(),
    );
    Arc::new(ExecManager::new(registration).unwrap())
}

#[tokio::test]
async fn sim_fabric_conforms() {
    let fabric = SimFabric::open(Arc::new(MemorySimState::new()))
        .await
        .unwrap();
    let manager = Arc::new(
        SimManager::fabric(
            Registration::sim("sim-fabric", Role::Fabric),
            fabric.clone(),
        )
        .unwrap(),
    );
    fabric_suite(manager.clone(), "c1").await.unwrap();
    // Everything was cleaned up, and the suite can run again on the same engine.
    assert!(fabric.dnat_rules().await.is_empty());
    assert!(fabric.snat_rules().await.is_empty());
    assert!(fabric.external_addresses().await.is_empty());
    assert_eq!(fabric.subnet_count().await, 0);
    fabric_suite(manager, "c2").await.unwrap();
}

#[tokio::test]
async fn sim_fabric_from_registry_conforms() {
    let reg = Registry::load_dir(&examples(), &DriverContext::in_memory())
        .await
        .unwrap();
    fabric_suite(reg.fabric("sim-fabric").unwrap(), "reg")
        .await
        .unwrap();
    k8s_suite(reg.k8s("sim-k8s").unwrap(), "reg").await.unwrap();
    assert!(matches!(reg.get("sim-k8s"), Some(RoleManager::K8s(_))));
}

#[tokio::test]
async fn sim_k8s_conforms() {
    let k8s = SimK8s::open(Arc::new(MemorySimState::new())).await.unwrap();
    let manager =
        Arc::new(SimManager::k8s(Registration::sim("sim-k8s", Role::K8s), k8s.clone()).unwrap());
    k8s_suite(manager, "k").await.unwrap();
    assert!(k8s.overlays().await.is_empty());
}

#[tokio::test]
async fn demo_exec_conforms() {
    let state = tempfile::tempdir().unwrap();
    let manager = demo_exec(state.path()).await;
    fabric_suite(manager.clone(), "c1").await.unwrap();
    fabric_suite(manager, "c2").await.unwrap();
    assert!(state.path().join("state.json").is_file());
}

/// A sim fabric whose `query_dhcp_lease` always answers the given lease (empty: none yet, as
/// with a real driver before any DHCP client ran).
struct FixedLease(Arc<dyn FabricManager>, PortAddresses);

#[async_trait]
impl FabricLayer for FixedLease {
    fn registration(&self) -> &Registration {
        self.0.registration()
    }

    async fn call<R: FabricRequest>(&self, request: &R) -> Result<R::Response, OpError> {
        if R::OPERATION == Operation::QueryDhcpLease {
            let lease: Box<dyn Any> = Box::new(self.1.clone());
            if let Ok(lease) = lease.downcast::<R::Response>() {
                return Ok(*lease);
            }
        }
        request.call_on(&*self.0).await
    }
}

async fn sim_fabric_manager() -> Arc<dyn FabricManager> {
    let fabric = SimFabric::open(Arc::new(MemorySimState::new()))
        .await
        .unwrap();
    Arc::new(SimManager::fabric(Registration::sim("sim-fabric", Role::Fabric), fabric).unwrap())
}

#[tokio::test]
async fn no_lease_before_dhcp_passes_only_when_the_driver_declares_it() {
    let none = PortAddresses::default();
    let manager: Arc<dyn FabricManager> = Arc::new(FixedLease(sim_fabric_manager().await, none));
    let err = fabric_suite(manager.clone(), "strict").await.unwrap_err();
    assert_eq!(err.step, "lease matches the attachment");
    let after_dhcp = FabricSuiteOptions {
        leases: LeaseReporting::AfterDhcp,
    };
    fabric_suite_with(manager, "after-dhcp", after_dhcp)
        .await
        .unwrap();
    // A lease that is there must still be the attachment's, also under the relaxed reading.
    let wrong = PortAddresses {
        ipv4_address: Some("10.77.1.200".parse().unwrap()),
        ipv6_address: None,
    };
    let manager: Arc<dyn FabricManager> = Arc::new(FixedLease(sim_fabric_manager().await, wrong));
    let err = fabric_suite_with(manager, "wrong", after_dhcp)
        .await
        .unwrap_err();
    assert_eq!(err.step, "lease matches the attachment");
}
