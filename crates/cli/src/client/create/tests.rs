use super::*;
use crate::client::args::{AdminCommand, ClientCommand};
use clap::{CommandFactory, Parser, Subcommand};

#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: ClientCommand,
}

/// Parses a command line given as one string (words split on whitespace).
fn try_parse(line: &str) -> Result<ClientCommand, clap::Error> {
    Cli::try_parse_from(std::iter::once("osac").chain(line.split_whitespace())).map(|c| c.cmd)
}

fn parse(line: &str) -> ClientCommand {
    try_parse(line).unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn tenant(line: &str) -> anyhow::Result<Value> {
    let ClientCommand::Create(c) = parse(line) else {
        panic!("not create: {line}")
    };
    let (kind, common, flags) = tenant_body(&c.what)?;
    request_body(kind, common, flags)
}

fn admin(line: &str) -> anyhow::Result<Value> {
    let ClientCommand::Admin(a) = parse(line) else {
        panic!("not admin: {line}")
    };
    let AdminCommand::Create(c) = a.command else {
        panic!("not create: {line}")
    };
    let (kind, common, flags) = admin_body(&c.what)?.expect("an object kind");
    request_body(kind, common, flags)
}

fn err(r: anyhow::Result<Value>) -> String {
    r.expect_err("should fail").to_string()
}

#[test]
fn cli_is_consistent() {
    #[derive(Debug, Parser)]
    struct Top {
        #[command(subcommand)]
        cmd: Cmds,
    }
    // Only parsed once, to check the command tree: size does not matter.
    #[allow(clippy::large_enum_variant)]
    #[derive(Debug, Subcommand)]
    enum Cmds {
        Server,
        #[command(flatten)]
        Client(ClientCommand),
    }
    Top::command().debug_assert();
}

#[test]
fn virtual_network() {
    let v = tenant(
        "create virtualnetwork --cidr 10.0.0.0/16 --cidr fd00::/48 --name my-net \
         --label team=web --network-class default",
    )
    .unwrap();
    let want = json!({
        "metadata": {"name": "my-net", "labels": {"team": "web"}},
        "spec": {"network_class": "default", "ipv4_cidr": "10.0.0.0/16", "ipv6_cidr": "fd00::/48"}
    });
    assert_eq!(v, want);
    let e = err(tenant("create vn --cidr 10.0.0.0/16 --cidr 10.1.0.0/16"));
    assert!(e.starts_with("--cidr: two CIDRs"), "{e}");
    let e = err(tenant("create vn --cidr 10.0.0.0 --name x"));
    assert!(e.contains("not a CIDR"), "{e}");
    let e = err(tenant("create vn --cidr 10.0.0.0/8 --label team"));
    assert!(e.starts_with("--label: invalid label 'team'"), "{e}");
}

#[test]
fn subnet_and_security_group() {
    let v = tenant("create subnet --virtual-network my-net --cidr 10.0.1.0/24 --name s").unwrap();
    let want = json!({
        "metadata": {"name": "s"},
        "spec": {"virtual_network": "my-net", "ipv4_cidr": "10.0.1.0/24"}
    });
    assert_eq!(v, want);
    let v = tenant(
        "create security-group --virtual-network my-net --name my-sg \
         --ingress protocol:tcp,port:443,source:0.0.0.0/0 \
         --egress protocol:all,destination:0.0.0.0/0",
    )
    .unwrap();
    let want = json!({
        "virtual_network": "my-net",
        "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 443, "port_to": 443, "ipv4_cidr": "0.0.0.0/0"}],
        "egress": [{"protocol": "PROTOCOL_ALL", "ipv4_cidr": "0.0.0.0/0"}]
    });
    assert_eq!(v["spec"], want);
    let e = err(tenant(
        "create sg --vn n --ingress protocol:tcp,port:x,source:0.0.0.0/0",
    ));
    assert!(e.starts_with("--ingress: invalid rule"), "{e}");
}

#[test]
fn external_ips_and_nat() {
    let v = tenant("create externalip --pool p --name my-ip").unwrap();
    assert_eq!(
        v,
        json!({"metadata": {"name": "my-ip"}, "spec": {"pool": "p"}})
    );
    let v = tenant("create eip --ip-family ipv6").unwrap();
    assert_eq!(v, json!({"spec": {"ip_family": "IP_FAMILY_IPV6"}}));
    let v =
        tenant("create externalipattachment --externalip my-ip --compute-instance vm1 --name att")
            .unwrap();
    assert_eq!(
        v["spec"],
        json!({"external_ip": "my-ip", "compute_instance": "vm1"})
    );
    let v = tenant("create eipa --external-ip ip --cluster c1 --endpoint ingress").unwrap();
    let want = json!({
        "external_ip": "ip", "cluster": "c1",
        "target_endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS"
    });
    assert_eq!(v["spec"], want);
    // The design's spelling.
    let v = tenant("create externalipattachment --externalip my-ip --cluster my-cluster --target-endpoint api --name api-att").unwrap();
    assert_eq!(
        v["spec"]["target_endpoint"],
        "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"
    );
    assert_eq!(v["spec"]["cluster"], "my-cluster");
    let v = tenant("create eipa --externalip ip --baremetal-instance b").unwrap();
    assert_eq!(
        v["spec"],
        json!({"external_ip": "ip", "baremetal_instance": "b"})
    );
    let e = err(tenant(
        "create eipa --externalip ip --compute-instance a --endpoint api",
    ));
    assert!(e.contains("--endpoint applies to --cluster"), "{e}");
    let e = err(tenant("create eipa --externalip ip"));
    assert!(e.contains("give the target"), "{e}");
    let v = tenant("create natgateway --virtual-network my-net --externalip nat-ip --name my-nat")
        .unwrap();
    assert_eq!(
        v["spec"],
        json!({"virtual_network": "my-net", "external_ip": "nat-ip"})
    );
}

#[test]
fn clap_rejects_bad_combinations() {
    let bad = [
        "create subnet --cidr 10.0.1.0/24",
        "create vn --name x",
        "create computeinstance --name vm",
        "create cluster --node-set w=h,size=1",
        "create eipa --externalip ip --cluster c1",
        "create eipa --externalip ip --compute-instance a --baremetal-instance b",
        "create eipa --externalip ip --compute-instance a --cluster c --endpoint api",
        "get widgets",
        "get subnet a --filter x",
        "delete subnet",
        "label subnet a",
        "update sg a --ingress protocol:all,source:any --clear-ingress",
        "admin create tenant",
        "admin create token --tenant t --role root",
        "create vn --cidr 10.0.0.0/8 --timeout soon",
        "get vn -o xml",
    ];
    for line in bad {
        assert!(try_parse(line).is_err(), "{line} should fail");
    }
}

#[test]
fn connection_flags_anywhere() {
    let ClientCommand::Get(g) = parse("get vn --url http://x:1 -o yaml") else {
        panic!()
    };
    assert_eq!(g.conn.url.as_deref(), Some("http://x:1"));
    assert_eq!(g.opts.kind, Kind::VirtualNetwork);
    let line = "admin --token t create pool --cidr 203.0.113.0/24 --url http://y";
    let ClientCommand::Admin(a) = parse(line) else {
        panic!()
    };
    assert_eq!(a.conn.url.as_deref(), Some("http://y"));
    assert_eq!(a.conn.token.as_deref(), Some("t"));
    let line = "create --url http://z subnet --vn n --cidr 10.0.0.0/24 --wait --timeout 5s";
    let ClientCommand::Create(c) = parse(line) else {
        panic!()
    };
    assert_eq!(c.conn.url.as_deref(), Some("http://z"));
    let ClientCommand::Delete(d) = parse("delete sg a b --wait --config /tmp/c.json") else {
        panic!()
    };
    assert_eq!(d.opts.names, ["a", "b"]);
    assert!(d.opts.wait.wait);
    assert_eq!(d.opts.wait.timeout, std::time::Duration::from_secs(120));
    assert_eq!(
        d.conn.config.as_deref(),
        Some(std::path::Path::new("/tmp/c.json"))
    );
}

#[test]
fn admin_objects() {
    let v = admin(
        "admin create network-class --name default --fabric-manager sim-fabric \
         --k8s-manager sim-k8s --default --default-vn-cidr 10.0.0.0/16 \
         --default-subnet-cidr 10.0.1.0/24 \
         --default-ingress protocol:tcp,port:22,source:0.0.0.0/0 \
         --default-egress protocol:all,destination:0.0.0.0/0 --enable-nat-gateway \
         --vip-prefix-length 28 --disable-capability dpu",
    )
    .unwrap();
    let want = json!({
        "metadata": {"name": "default"},
        "fabric_manager": "sim-fabric", "k8s_manager": "sim-k8s", "is_default": true,
        "spec": {
            "defaults": {
                "virtual_network_ipv4_cidr": "10.0.0.0/16", "subnet_ipv4_cidr": "10.0.1.0/24",
                "ingress_rules": [{"protocol": "PROTOCOL_TCP", "port_from": 22, "port_to": 22, "ipv4_cidr": "0.0.0.0/0"}],
                "egress_rules": [{"protocol": "PROTOCOL_ALL", "ipv4_cidr": "0.0.0.0/0"}],
                "enable_nat_gateway": true
            },
            "disable_capabilities": {"dpu_support": true},
            "vip_prefix_length": 28
        }
    });
    assert_eq!(v, want);
    let v = admin("admin create pool --name p --cidr 203.0.113.0/24").unwrap();
    let want = json!({
        "metadata": {"name": "p"},
        "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["203.0.113.0/24"]}
    });
    assert_eq!(v, want);
    // The design's spelling.
    let v = admin("admin create externalippool --network-class moc-region-1 --cidrs 203.0.113.0/24,198.51.100.0/24 --ip-family ipv4 --name external-pool-1").unwrap();
    let want = json!({
        "metadata": {"name": "external-pool-1"},
        "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["203.0.113.0/24", "198.51.100.0/24"], "network_class": "moc-region-1"}
    });
    assert_eq!(v, want);
    let e = err(admin(
        "admin create pool --cidr 203.0.113.0/24 --ip-family ipv6",
    ));
    assert!(e.contains("one address family"), "{e}");
    let v = admin(
        "admin create host-type --name h100 --interface data-0:fabric --interface bmc-0:lifecycle",
    )
    .unwrap();
    let want = json!({
        "metadata": {"name": "h100"},
        "interfaces": [{"name": "data-0", "role": "fabric"}, {"name": "bmc-0", "role": "lifecycle"}]
    });
    assert_eq!(v, want);
    let v = admin("admin create tenant --name acme --domain acme.example").unwrap();
    assert_eq!(
        v,
        json!({"metadata": {"name": "acme"}, "spec": {"domains": ["acme.example"]}})
    );
    let v = admin("admin create host --name h1 --host-type h100 --interface data-0=52:54:00:00:00:01 --pool caas")
        .unwrap();
    let want = json!({
        "metadata": {"name": "h1"},
        "spec": {"host_type": "h100", "pool": "caas",
                 "interfaces": [{"name": "data-0", "mac_address": "52:54:00:00:00:01"}]}
    });
    assert_eq!(v, want);
    let ClientCommand::Admin(a) = parse("admin create token --tenant acme --role tenant-admin")
    else {
        panic!()
    };
    let AdminCommand::Create(c) = a.command else {
        panic!()
    };
    assert!(admin_body(&c.what).unwrap().is_none());
}

/// Splits like a shell would for the test lines below: words on whitespace, except inside
/// single quotes.
fn tenant_words(words: &[&str]) -> anyhow::Result<Value> {
    let c = Cli::try_parse_from(std::iter::once("osac").chain(words.iter().copied()))
        .unwrap_or_else(|e| panic!("{words:?}: {e}"))
        .cmd;
    let ClientCommand::Create(c) = c else {
        panic!("not create")
    };
    let (kind, common, flags) = tenant_body(&c.what)?;
    request_body(kind, common, flags)
}

/// The PRD's spelling: `--primary SUBNET` next to the attachments, for VMs and bare metal.
#[test]
fn primary_flag_names_the_primary_subnet() {
    let v = tenant(
        "create computeinstance --template t --network-attachment subnet=a \
         --network-attachment subnet=b --primary b --name vm",
    )
    .unwrap();
    assert_eq!(
        v["spec"]["compute_network_attachments"],
        json!([{"subnet": "a"}, {"subnet": "b", "primary": true}])
    );
    let v = tenant(
        "create baremetalinstance --host-type h100 \
         --network-attachment interface=data-0,subnet=a \
         --network-attachment interface=data-1,subnet=b --primary a --name s1",
    )
    .unwrap();
    assert_eq!(
        v["spec"]["network_attachments"],
        json!([
            {"subnet": "a", "interface": "data-0", "primary": true},
            {"subnet": "b", "interface": "data-1"}
        ])
    );
    let e = err(tenant(
        "create vm --template t --network-attachment subnet=a \
         --network-attachment subnet=b --primary c",
    ));
    assert!(
        e.starts_with("--primary: 'c' is not the subnet of any"),
        "{e}"
    );
    let e = err(tenant(
        "create vm --template t --network-attachment subnet=a,primary \
         --network-attachment subnet=b --primary b",
    ));
    assert!(e.contains("disagrees with ',primary'"), "{e}");
    // Without attachments there is nothing to mark.
    assert!(try_parse("create vm --template t --primary b").is_err());
}

#[test]
fn compute_instance_spec_forms() {
    let v = tenant(
        "create computeinstance --template ocp_virt_vm \
         --network-attachment subnet=my-subnet,security-groups=my-sg --name my-vm",
    )
    .unwrap();
    let want = json!({
        "metadata": {"name": "my-vm"},
        "spec": {"template": "ocp_virt_vm", "compute_network_attachments": [
            {"subnet": "my-subnet", "security_groups": ["my-sg"]}]}
    });
    assert_eq!(v, want);
    let v = tenant_words(&[
        "create",
        "vm",
        "--template",
        "t",
        "--network-attachment",
        "subnet=a,security-groups=web;ssh,primary",
        "--network-attachment",
        "subnet=b",
        "--param",
        "cpus=4",
        "--param",
        "image=rhel9",
        "--name",
        "vm1",
        "--wait",
    ])
    .unwrap();
    let want = json!({
        "metadata": {"name": "vm1"},
        "spec": {"template": "t",
            "template_parameters": {"cpus": 4, "image": "rhel9"},
            "compute_network_attachments": [
                {"subnet": "a", "security_groups": ["web", "ssh"], "primary": true},
                {"subnet": "b"}]}
    });
    assert_eq!(v, want);
    let v = tenant(
        "create computeinstance --template ocp_virt_vm --external-ip-attachment --name my-vm",
    )
    .unwrap();
    assert_eq!(
        v["spec"],
        json!({"template": "ocp_virt_vm", "auto_external_ip_attachment": true})
    );
    let e = err(tenant(
        "create vm --template t --network-attachment subnet=a,interface=eth0",
    ));
    assert!(
        e.starts_with("--network-attachment: invalid network attachment"),
        "{e}"
    );
    let e = err(tenant(
        "create vm --template t --network-attachment subnet=a --network-attachment subnet=b",
    ));
    assert!(e.contains("exactly one is primary"), "{e}");
    assert!(
        try_parse("create vm --name x").is_err(),
        "--template is required"
    );
}

#[test]
fn baremetal_instance_spec_form() {
    let v = tenant(
        "create baremetalinstance --host-type h100 \
         --network-attachment interface=data-0,subnet=a,primary \
         --network-attachment interface=data-1,subnet=b --name s1",
    )
    .unwrap();
    let want = json!({
        "metadata": {"name": "s1"},
        "spec": {"host_type": "h100", "network_attachments": [
            {"subnet": "a", "interface": "data-0", "primary": true},
            {"subnet": "b", "interface": "data-1"}]}
    });
    assert_eq!(v, want);
    let e = err(tenant(
        "create bmi --host-type h --network-attachment subnet=a,primary --network-attachment interface=data-1,subnet=b",
    ));
    assert!(e.contains("names its interface"), "{e}");
    assert!(
        try_parse("create bmi --name x").is_err(),
        "--host-type is required"
    );
}

#[test]
fn cluster_spec_form() {
    let v = tenant(
        "create cluster --template ocp_4_17_small --network-attachment subnet=my-subnet \
         --node-set workers=h100,size=3 --name c1",
    )
    .unwrap();
    let want = json!({
        "metadata": {"name": "c1"},
        "spec": {"template": "ocp_4_17_small",
                 "network_attachment": {"subnet": "my-subnet"},
                 "node_sets": {"workers": {"host_type": "h100", "size": 3}}}
    });
    assert_eq!(v, want);
    let v = tenant(
        "create cluster --template t --network-attachment subnet=s,security-groups=a;b \
         --node-set workers=h100,size=3 --node-set infra=bm,size=1 --external-ip-attachment",
    )
    .unwrap();
    assert_eq!(
        v["spec"]["network_attachment"],
        json!({"subnet": "s", "security_groups": ["a", "b"]})
    );
    assert_eq!(
        v["spec"]["node_sets"]["infra"],
        json!({"host_type": "bm", "size": 1})
    );
    assert_eq!(v["spec"]["auto_external_ip_attachment"], true);
    let e = err(tenant(
        "create cluster --template t --node-set workers=h100",
    ));
    assert!(e.starts_with("--node-set: invalid node set"), "{e}");
    let e = err(tenant(
        "create cluster --template t --network-attachment subnet=s,primary",
    ));
    assert!(e.contains("no 'primary'"), "{e}");
    assert!(
        try_parse("create cluster --template t --network-attachment subnet=a --network-attachment subnet=b")
            .is_err(),
        "one attachment per cluster"
    );
}

#[test]
fn external_ip_attachment_targets() {
    let v = tenant("create externalipattachment --externalip ip --compute-instance vm1").unwrap();
    assert_eq!(
        v["spec"],
        json!({"external_ip": "ip", "compute_instance": "vm1"})
    );
    let v = tenant("create eipa --externalip ip --baremetal-instance s1").unwrap();
    assert_eq!(
        v["spec"],
        json!({"external_ip": "ip", "baremetal_instance": "s1"})
    );
    let v = tenant("create eipa --externalip ip --cluster c1 --endpoint ingress").unwrap();
    assert_eq!(
        v["spec"],
        json!({"external_ip": "ip", "cluster": "c1",
               "target_endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS"})
    );
    assert!(try_parse("create eipa --externalip ip --cluster c1").is_err());
    assert!(
        try_parse("create eipa --externalip ip --compute-instance a --cluster c --endpoint api")
            .is_err()
    );
}

#[test]
fn host_with_interface_list() {
    let v = admin(
        "admin create host --name h1 --host-type bm-standard \
         --interface data-0=02:00:00:00:00:01,data-1=02:00:00:00:00:02 \
         --interface mgmt-0=02:00:00:00:00:03 --pool baremetal",
    )
    .unwrap();
    let want = json!({
        "metadata": {"name": "h1"},
        "spec": {"host_type": "bm-standard", "pool": "baremetal", "interfaces": [
            {"name": "data-0", "mac_address": "02:00:00:00:00:01"},
            {"name": "data-1", "mac_address": "02:00:00:00:00:02"},
            {"name": "mgmt-0", "mac_address": "02:00:00:00:00:03"}]}
    });
    assert_eq!(v, want);
    let e = err(admin(
        "admin create host --host-type t --interface data-0=02:00:00:00:00:01,data-0=02:00:00:00:00:02",
    ));
    assert!(e.contains("'data-0' is given twice"), "{e}");
    assert!(try_parse("admin create host --host-type t --pool gpu").is_err());
}

#[test]
fn from_file_with_flag_overrides() {
    let dir = std::env::temp_dir().join(format!("osac-cli-create-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("nc.yaml");
    let yaml = "metadata:\n  name: from-file\n  labels: {a: \"1\"}\n  version: \"7\"\n\
                fabric_manager: fab\nspec:\n  defaults:\n    virtual_network_ipv4_cidr: 10.0.0.0/16\n\
                status:\n  state: NETWORK_CLASS_STATE_READY\n";
    std::fs::write(&f, yaml).unwrap();
    let line = format!(
        "admin create nc --from-file {} --label b=2 --k8s-manager k",
        f.display()
    );
    let want = json!({
        "metadata": {"name": "from-file", "labels": {"a": "1", "b": "2"}},
        "fabric_manager": "fab", "k8s_manager": "k",
        "spec": {"defaults": {"virtual_network_ipv4_cidr": "10.0.0.0/16"}}
    });
    assert_eq!(admin(&line).unwrap(), want);
    let f2 = dir.join("vm.json");
    std::fs::write(
        &f2,
        r#"{"metadata":{"name":"vm1"},"spec":{"template":"ocp_virt_vm"}}"#,
    )
    .unwrap();
    let v = tenant(&format!("create vm -f {} --name vm2", f2.display())).unwrap();
    assert_eq!(
        v,
        json!({"metadata": {"name": "vm2"}, "spec": {"template": "ocp_virt_vm"}})
    );
    let e = err(tenant("create subnet -f /nonexistent/x.yaml"));
    assert!(e.contains("cannot read /nonexistent/x.yaml"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
