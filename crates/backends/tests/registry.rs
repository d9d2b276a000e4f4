//! Registry loading from a config directory and NetworkClass validation helpers.

use std::sync::Arc;

use osac_backends::{
    Capability, DriverConfig, DriverContext, MemorySimState, Operation, Registration, Registry,
    RegistryError, Role, RoleManager, SimFabric, SimManager,
};

mod support;
use support::{dir_with, examples, load};

/// Why a managers directory holding `files` does not load.
async fn load_err(files: &[(&str, &str)]) -> String {
    let dir = dir_with(files);
    support::load_err(dir.path()).await
}

#[tokio::test]
async fn loads_the_examples() {
    let reg = load(&examples()).await;
    let names: Vec<&str> = reg
        .registrations()
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, ["demo-exec", "sim-fabric", "sim-k8s"]);

    let fabric = reg.check("sim-fabric", Role::Fabric).unwrap();
    assert!(fabric.supports(Capability::DualStack));
    let k8s = reg.check("sim-k8s", Role::K8s).unwrap();
    assert_eq!(k8s.hosting_clusters, ["hosting-a", "hosting-b"]);

    let demo = reg.check("demo-exec", Role::Fabric).unwrap();
    let DriverConfig::Exec(exec) = &demo.driver else {
        panic!("demo-exec is not exec")
    };
    assert!(exec.command.ends_with("demo-exec/manager.py"));
    assert!(
        exec.command.is_file(),
        "{} resolved",
        exec.command.display()
    );
    assert_eq!(exec.timeout_seconds, 30);

    assert!(reg.sim_fabric("sim-fabric").is_some());
    assert!(reg.sim_k8s("sim-k8s").is_some());
    assert!(reg.fabric("sim-fabric").is_ok());
    assert!(reg.k8s("sim-k8s").is_ok());
    assert!(reg.origin("sim-k8s").unwrap().ends_with("sim-k8s.yaml"));
}

#[tokio::test]
async fn check_messages() {
    let reg = load(&examples()).await;
    assert_eq!(
        reg.check("nope", Role::Fabric).unwrap_err().to_string(),
        "manager 'nope' is not registered"
    );
    assert_eq!(
        reg.check("sim-k8s", Role::Fabric).unwrap_err().to_string(),
        "manager 'sim-k8s' is registered for role k8s, not fabric"
    );
    assert!(matches!(
        reg.fabric("sim-k8s"),
        Err(RegistryError::WrongRole { .. })
    ));
    let caps = reg
        .class_capabilities("sim-fabric", Some("sim-k8s"))
        .unwrap();
    assert_eq!(
        caps.into_iter().collect::<Vec<_>>(),
        [Capability::Ipv4, Capability::Ipv6, Capability::DualStack]
    );
    assert!(
        reg.class_capabilities("sim-fabric", Some("demo-exec"))
            .is_err()
    );
}

#[tokio::test]
async fn class_capabilities_intersect() {
    let dir = dir_with(&[
        (
            "f.yaml",
            "name: f\nrole: fabric\ncapabilities: [ipv4, ipv6, dual_stack]\ndriver: sim\n",
        ),
        (
            "k.yaml",
            "name: k\nrole: k8s\ncapabilities: [ipv4]\ndriver: sim\n",
        ),
    ]);
    let reg = load(dir.path()).await;
    let caps = reg.class_capabilities("f", Some("k")).unwrap();
    assert_eq!(caps.into_iter().collect::<Vec<_>>(), [Capability::Ipv4]);
    assert_eq!(reg.class_capabilities("f", None).unwrap().len(), 3);
}

#[tokio::test]
async fn unknown_and_unavailable_drivers() {
    let err = load_err(&[("a.yaml", "name: a\nrole: fabric\ndriver: netris\n")]).await;
    assert!(err.contains("a.yaml"), "{err}");
    assert!(err.contains("unknown driver 'netris'"), "{err}");
    let err = load_err(&[(
        "l.yaml",
        "name: l\nrole: fabric\ndriver: linux\nlinux: {uplink: eth0}\n",
    )])
    .await;
    assert!(err.contains("l.yaml"), "{err}");
    assert!(
        err.contains("driver 'linux' is not available in this build"),
        "{err}"
    );
}

#[tokio::test]
async fn wrong_keys_and_bad_role() {
    let err = load_err(&[(
        "w.yml",
        "name: w\nrole: fabric\ndriver: sim\ncapabilites: [ipv4]\n",
    )])
    .await;
    assert!(
        err.contains("w.yml") && err.contains("unknown field `capabilites`"),
        "{err}"
    );
    let err = load_err(&[("r.yaml", "name: r\nrole: router\ndriver: sim\n")]).await;
    assert!(
        err.contains("r.yaml") && err.contains("unknown variant `router`"),
        "{err}"
    );
    let err = load_err(&[("n.yaml", "name: Not_A_Label\nrole: fabric\ndriver: sim\n")]).await;
    assert!(
        err.contains("n.yaml") && err.contains("not a DNS label"),
        "{err}"
    );
    let err = load_err(&[("e.yaml", "role: fabric\ndriver: sim\n")]).await;
    assert!(
        err.contains("e.yaml") && err.contains("missing field `name`"),
        "{err}"
    );
    let err = load_err(&[("x.yaml", ": : not yaml [")]).await;
    assert!(err.contains("x.yaml"), "{err}");
}

#[tokio::test]
async fn duplicate_names() {
    let err = load_err(&[
        ("a.yaml", "name: same\nrole: fabric\ndriver: sim\n"),
        ("b.yaml", "name: same\nrole: k8s\ndriver: sim\n"),
    ])
    .await;
    assert!(err.contains("manager 'same' is registered twice"), "{err}");
    assert!(err.contains("a.yaml") && err.contains("b.yaml"), "{err}");
}

#[tokio::test]
async fn ignores_other_files_and_missing_dir_is_an_error() {
    let dir = dir_with(&[
        ("README.md", "# hi"),
        (".hidden.yaml", "garbage: ["),
        ("f.yml", "name: f\nrole: fabric\ndriver: sim\n"),
    ]);
    std::fs::create_dir(dir.path().join("sub.yaml")).unwrap();
    let reg = load(dir.path()).await;
    assert_eq!(reg.len(), 1);
    let err = Registry::load_dir(&dir.path().join("missing"), &DriverContext::in_memory())
        .await
        .unwrap_err();
    assert!(matches!(err, RegistryError::ReadDir { .. }));
}

#[tokio::test]
async fn shared_engine_and_programmatic_dev_setup() {
    let store = Arc::new(MemorySimState::new());
    let fabric = SimFabric::open(store.clone()).await.unwrap();
    let ctx = DriverContext::new(store.clone()).with_sim_fabric(fabric.clone());
    let dir = dir_with(&[
        ("a.yaml", "name: a\nrole: fabric\ndriver: sim\n"),
        ("b.yaml", "name: b\nrole: fabric\ndriver: sim\n"),
    ]);
    let reg = Registry::load_dir(dir.path(), &ctx).await.unwrap();
    let a = reg.fabric("a").unwrap();
    let b = reg.fabric("b").unwrap();
    a.create_virtual_network(&osac_backends::CreateVirtualNetworkRequest {
        virtual_network_id: "vn".into(),
        tenant: "t".into(),
        ipv4_cidr: None,
        ipv6_cidr: None,
    })
    .await
    .unwrap();
    // b shares a's engine: the VN is visible through it.
    b.delete_virtual_network(&osac_backends::DeleteVirtualNetworkRequest {
        virtual_network_id: "vn".into(),
    })
    .await
    .unwrap();
    assert_eq!(fabric.call_count(Operation::CreateVirtualNetwork), 1);
    assert_eq!(fabric.call_count(Operation::DeleteVirtualNetwork), 1);
    assert!(fabric.virtual_network("vn").await.is_none());

    // Dev mode.
    let dev = Registry::sim_dev(&DriverContext::new(store.clone()))
        .await
        .unwrap();
    assert!(dev.check("sim-fabric", Role::Fabric).is_ok());
    assert!(dev.check("sim-k8s", Role::K8s).is_ok());

    // Programmatic insert, with duplicate and name checks.
    let mut reg = Registry::new();
    let m = RoleManager::Fabric(Arc::new(
        SimManager::fabric(Registration::sim("f", Role::Fabric), fabric.clone()).unwrap(),
    ));
    reg.insert(m.clone()).unwrap();
    assert!(matches!(
        reg.insert(m),
        Err(RegistryError::Duplicate { .. })
    ));
    let bad = RoleManager::Fabric(Arc::new(
        SimManager::fabric(Registration::sim("Bad Name", Role::Fabric), fabric.clone()).unwrap(),
    ));
    assert!(matches!(
        reg.insert(bad),
        Err(RegistryError::InvalidName(_))
    ));
    assert!(SimManager::fabric(Registration::sim("k", Role::K8s), fabric).is_err());
    reg.register(
        Registration::sim("k", Role::K8s),
        &DriverContext::new(store),
    )
    .await
    .unwrap();
    assert_eq!(reg.len(), 2);
}

/// A fabric manager whatever its registration says (it answers nothing).
struct AnyRegistration(Registration);

#[async_trait::async_trait]
impl osac_backends::FabricLayer for AnyRegistration {
    fn registration(&self) -> &Registration {
        &self.0
    }

    async fn call<R: osac_backends::FabricRequest>(
        &self,
        _request: &R,
    ) -> Result<R::Response, osac_backends::OpError> {
        Err(osac_backends::OpError::permanent("not implemented"))
    }
}

/// Starts every registration as a fabric manager.
struct FabricOnly;

#[async_trait::async_trait]
impl osac_backends::DriverFactory for FabricOnly {
    async fn start(&self, registration: Registration) -> Result<RoleManager, String> {
        Ok(RoleManager::Fabric(Arc::new(AnyRegistration(registration))))
    }
}

#[tokio::test]
async fn a_driver_serving_another_role_is_refused() {
    let ctx = DriverContext::in_memory().with_driver_factory("linux", Arc::new(FabricOnly));
    let dir = dir_with(&[(
        "l.yaml",
        "name: l\nrole: k8s\ndriver: linux\nlinux: {uplink: eth0}\n",
    )]);
    let err = Registry::load_dir(dir.path(), &ctx).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "manager 'l' is registered for role k8s, but its driver serves role fabric"
    );

    let mut reg = Registry::new();
    let k8s_registration = Registration::sim("k", Role::K8s);
    let err = reg
        .insert(RoleManager::Fabric(Arc::new(AnyRegistration(
            k8s_registration,
        ))))
        .unwrap_err();
    assert!(matches!(err, RegistryError::DriverRole { .. }), "{err}");
    assert!(reg.is_empty());
}
