//! The provisioner contract suite of `osac-backends` (the one sim and the example exec program
//! pass), run against the `linux` provisioner on machines the linux fabric plugged: a VM and
//! a bare-metal server whose ports are on a real subnet with dnsmasq. Also checks that address
//! discovery reports the lease the machine's DHCP client took. Root; skipped (printing why)
//! without root/tools, failing under `CI=true`.

mod common;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Env;
use osac_backends::provision::conformance::{ProvisionerFixture, provisioner_suite};
use osac_backends::provision::{MachineRef, Nic, PowerState, Provisioner, RunStrategy};
use osac_backends::{
    CreateNetworkAttachmentRequest, CreateSubnetRequest, CreateVirtualNetworkRequest,
};
use osac_linux::dhcp::Timing;
use osac_linux::provision::{LinuxProvisioner, MachineScope, SUPERVISE_EVERY};
use osac_linux::{cmd, names};

/// Serves this test's machines only.
struct OnlyKeys(BTreeSet<String>);

#[async_trait::async_trait]
impl MachineScope for OnlyKeys {
    async fn machine_keys(&self) -> Option<BTreeSet<String>> {
        Some(self.0.clone())
    }
}

/// Plugs `host`/`iface` with `mac` into the subnet; returns the reserved IPv4 address.
async fn plug(env: &Env, att: &str, host: &str, iface: &str, mac: &str) -> IpAddr {
    let port = env
        .client
        .create_network_attachment(&CreateNetworkAttachmentRequest {
            attachment_id: env.id(att),
            host: host.into(),
            interface: iface.into(),
            mac_address: mac.into(),
            subnet_id: env.id("subnet"),
            virtual_network_id: env.id("vn"),
            security_groups: vec![],
            primary: true,
            allowed_addresses: vec![],
        })
        .await
        .unwrap();
    port.ipv4_address.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linux_provisioner_passes_the_provisioner_suite() {
    if !common::ready().await {
        return;
    }
    let env = Env::new(27).await;
    env.client
        .create_virtual_network(&CreateVirtualNetworkRequest {
            virtual_network_id: env.id("vn"),
            tenant: "t".into(),
            ipv4_cidr: Some("10.0.0.0/16".parse().unwrap()),
            ipv6_cidr: None,
        })
        .await
        .unwrap();
    env.client
        .create_subnet(&CreateSubnetRequest {
            subnet_id: env.id("subnet"),
            virtual_network_id: env.id("vn"),
            ipv4_cidr: Some("10.0.1.0/24".parse().unwrap()),
            ipv6_cidr: None,
            vip_cidr: None,
        })
        .await
        .unwrap();

    // The machines, named like the fabric names them: a VM's namespace is its instance id's,
    // a server's its inventory host's.
    let mut fixture = ProvisionerFixture::new(&env.tag);
    let (vm_id, host_id) = (env.id("vm"), env.id("host"));
    fixture.unknown_instance = env.id("nobody");
    fixture.cluster = None;
    let (vm_mac, bm_mac) = ("02:27:00:00:00:01", "02:27:00:00:00:02");
    let nic = |name: &str, mac: &str| Nic {
        name: name.into(),
        mac_address: mac.into(),
        subnet_id: env.id("subnet"),
        primary: true,
    };
    fixture.vm.instance_id = vm_id.clone();
    fixture.vm.nics = vec![nic("eth0", vm_mac)];
    fixture.bare_metal.host_id = host_id.clone();
    fixture.bare_metal.nics = vec![nic("data-0", bm_mac)];
    plug(&env, "vm-port", &vm_id, "eth0", vm_mac).await;
    let bm_address = plug(&env, "bm-port", &host_id, "data-0", bm_mac).await;

    let scope = OnlyKeys([vm_id.clone(), host_id.clone()].into());
    let p = LinuxProvisioner::start(Timing::default(), Some(Arc::new(scope)));

    // Discovery reports what the server's DHCP client leased: the fabric's reservation.
    p.provision_baremetal(&fixture.bare_metal).await.unwrap();
    let bm = MachineRef::BareMetal {
        instance_id: fixture.bare_metal.instance_id.clone(),
        host_id: host_id.clone(),
    };
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let found = p.discover_addresses(&bm).await.unwrap();
        if found
            .iter()
            .any(|n| n.ipv4_address.map(IpAddr::V4) == Some(bm_address))
        {
            assert_eq!(found.len(), 1, "{found:?}");
            assert_eq!(found[0].mac_address, bm_mac);
            break;
        }
        assert!(Instant::now() < until, "no lease discovered: {found:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Provisioned again HALTED: powered off, the clients stop and the address goes, and the
    // supervisor's passes leave it off.
    let mut halted = fixture.bare_metal.clone();
    halted.run_strategy = RunStrategy::Halted;
    p.provision_baremetal(&halted).await.unwrap();
    let found = p.discover_addresses(&bm).await.unwrap();
    assert!(found.iter().all(|n| n.ipv4_address.is_none()), "{found:?}");
    tokio::time::sleep(SUPERVISE_EVERY * 3).await;
    let found = p.discover_addresses(&bm).await.unwrap();
    assert!(found.iter().all(|n| n.ipv4_address.is_none()), "{found:?}");
    // Powered off explicitly: the same.
    p.power(&bm, PowerState::Off).await.unwrap();
    let found = p.discover_addresses(&bm).await.unwrap();
    assert!(found.iter().all(|n| n.ipv4_address.is_none()), "{found:?}");
    let ns = names::machine_ns(&host_id);
    let addrs = cmd::ip(Some(&ns), &["-4", "addr", "show", "dev", "data-0"])
        .await
        .unwrap();
    assert!(!addrs.contains(&bm_address.to_string()), "{addrs}");

    let provisioner: Arc<dyn Provisioner> = p.clone();
    provisioner_suite(provisioner, &fixture).await.unwrap();
    assert!(
        !cmd::netns_exists(&names::machine_ns(&vm_id)).await.unwrap(),
        "deleting the VM removed its namespace"
    );
    p.shutdown().await;
    drop(p);
    env.teardown().await;
}
