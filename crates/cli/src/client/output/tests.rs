use super::cells::short_id;
use super::*;
use serde_json::json;

const VN_ID: &str = "01939a6e-1111-7000-8000-00000000aaaa";

fn names() -> RefNames {
    RefNames::from([(VN_ID.to_string(), "my-net".to_string())])
}

/// The words of the first row under the header of `kind`'s table of `item`.
fn first_row(kind: Kind, item: serde_json::Value, refs: &RefNames) -> Vec<String> {
    let out = table(kind, &[item], refs).render();
    let row = out
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("no row: {out}"));
    row.split_whitespace().map(str::to_string).collect()
}

#[test]
fn table_alignment() {
    let mut t = Table::new(&["A", "LONGER", "C"]);
    t.push(vec!["xxxx".into(), "y".into(), "".into()]);
    t.push(vec!["z".into(), "-".into(), "last col".into()]);
    assert_eq!(
        t.render(),
        "A      LONGER   C\nxxxx   y\nz      -        last col\n"
    );
}

#[test]
fn subnet_table() {
    let items = [
        json!({
            "id": "01939a6e-2222-7000-8000-0000deadbeef",
            "metadata": {"name": "my-subnet"},
            "spec": {"virtual_network": VN_ID, "ipv4_cidr": "10.0.1.0/24", "ipv6_cidr": "fd00:0:0:1::/64"},
            "status": {"state": "SUBNET_STATE_READY", "segment_id": "seg-7",
                       "ipv4_gateway": "10.0.1.1", "ipv6_gateway": "fd00:0:0:1::1"}
        }),
        json!({
            "id": "01939a6e-3333-7000-8000-000000000001",
            "metadata": {"name": "b"},
            "spec": {"virtual_network": "01939a6e-9999-7000-8000-00000000ffff", "ipv4_cidr": "10.0.2.0/24"},
            "status": {"state": "SUBNET_STATE_FAILED", "message": "fabric said no"}
        }),
    ];
    let out = table(Kind::Subnet, &items, &names()).render();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "NAME", "ID", "STATE", "NETWORK", "CIDRS", "SEGMENT", "GATEWAYS", "MESSAGE"
        ]
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        [
            "my-subnet",
            "deadbeef",
            "READY",
            "my-net",
            "10.0.1.0/24,fd00:0:0:1::/64",
            "seg-7",
            "10.0.1.1,fd00:0:0:1::1"
        ]
    );
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        [
            "b",
            "00000001",
            "FAILED",
            "0000ffff",
            "10.0.2.0/24",
            "-",
            "-",
            "fabric",
            "said",
            "no"
        ]
    );
}

#[test]
fn security_group_and_eip_tables() {
    let sg = json!({
        "id": "x1", "metadata": {"name": "web"},
        "spec": {"virtual_network": VN_ID,
                 "ingress": [{"protocol": "PROTOCOL_TCP", "port_from": 443, "port_to": 443, "ipv4_cidr": "0.0.0.0/0"}]},
        "status": {"state": "SECURITY_GROUP_STATE_PENDING"}
    });
    let out = table(Kind::SecurityGroup, &[sg], &names()).render();
    assert!(out.lines().nth(1).unwrap().starts_with("web "), "{out}");
    assert!(out.contains("my-net    tcp/443 0.0.0.0/0   -\n"), "{out}");
    assert!(out.contains("PENDING"), "{out}");

    let eip = json!({
        "id": "e1", "metadata": {"name": "my-ip"}, "spec": {},
        "status": {"state": "EXTERNAL_IP_STATE_ALLOCATED", "address": "203.0.113.5", "pool": "p1"}
    });
    assert_eq!(
        first_row(Kind::ExternalIp, eip, &RefNames::new()),
        ["my-ip", "e1", "ALLOCATED", "203.0.113.5", "p1", "false"]
    );
}

#[test]
fn pool_class_hosttype_tables() {
    let pool = json!({
        "id": "p", "metadata": {"name": "ext"},
        "spec": {"ip_family": "IP_FAMILY_IPV4", "cidrs": ["203.0.113.0/24"]},
        "status": {"state": "EXTERNAL_IP_POOL_STATE_READY", "total": "256", "allocated": "2", "available": "254"}
    });
    assert_eq!(
        first_row(Kind::ExternalIpPool, pool, &RefNames::new()),
        [
            "ext",
            "p",
            "READY",
            "IPV4",
            "203.0.113.0/24",
            "256",
            "2",
            "254"
        ]
    );

    let nc = json!({
        "id": "c", "metadata": {"name": "default"}, "is_default": true,
        "fabric_manager": "sim-fabric",
        "capabilities": {"supports_ipv4": true, "supports_ipv6": true, "supports_dual_stack": true},
        "status": {"state": "NETWORK_CLASS_STATE_READY"}
    });
    assert_eq!(
        first_row(Kind::NetworkClass, nc, &RefNames::new()),
        [
            "default",
            "c",
            "READY",
            "true",
            "sim-fabric",
            "-",
            "ipv4,ipv6,dual-stack"
        ]
    );

    let ht = json!({"id": "h", "metadata": {"name": "h100"}, "title": "H100",
                    "interfaces": [{"name": "data-0", "role": "fabric"}, {"name": "bmc-0", "role": "lifecycle"}]});
    let out = table(Kind::HostType, &[ht], &RefNames::new()).render();
    assert_eq!(
        out,
        "NAME   ID   TITLE   INTERFACES\nh100   h    H100    data-0:fabric,bmc-0:lifecycle\n"
    );
}

#[test]
fn attachment_and_tenant_tables() {
    let a = json!({
        "id": "a", "metadata": {"name": "att"},
        "spec": {"external_ip": "eip-id", "cluster": "c-id", "target_endpoint": "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"},
        "status": {"state": "EXTERNAL_IP_ATTACHMENT_STATE_PENDING", "external_ip_address": "203.0.113.9"}
    });
    let refs = RefNames::from([
        ("eip-id".to_string(), "my-ip".to_string()),
        ("c-id".to_string(), "c1".to_string()),
    ]);
    assert_eq!(
        first_row(Kind::ExternalIpAttachment, a, &refs),
        [
            "att",
            "a",
            "PENDING",
            "my-ip",
            "203.0.113.9",
            "cluster/c1:api",
            "-"
        ]
    );

    let t = json!({
        "id": "t", "metadata": {"name": "acme"},
        "status": {"state": "TENANT_STATE_FAILED", "conditions": [
            {"type": "TENANT_CONDITION_TYPE_DEFAULT_NETWORKING_READY", "status": "CONDITION_STATUS_FALSE",
             "message": "pool exhausted"}]}
    });
    let out = table(Kind::Tenant, &[t], &RefNames::new()).render();
    assert!(
        out.ends_with("acme   t    FAILED   -         pool exhausted\n"),
        "{out}"
    );
}

#[test]
fn managers_and_raw() {
    let m = json!({"name": "sim-fabric", "role": "fabric", "driver": "sim",
                   "capabilities": ["ipv4", "ipv6", "dual_stack"], "description": "simulated fabric"});
    let out = managers_table(&[m]).render();
    assert!(
        out.contains("sim-fabric   fabric   sim      ipv4,ipv6,dual_stack   simulated fabric"),
        "{out}"
    );

    let v = json!({"id": "i1", "metadata": {"name": "n1"}});
    assert_eq!(
        render_raw(
            OutputFormat::Json,
            Kind::Subnet,
            std::slice::from_ref(&v),
            true,
            None
        )
        .unwrap(),
        serde_json::to_string_pretty(&v).unwrap() + "\n"
    );
    // A list is a list object: items, how many here, how many matched on the server.
    let listed: Value = serde_json::from_str(
        &render_raw(
            OutputFormat::Json,
            Kind::Subnet,
            std::slice::from_ref(&v),
            false,
            Some(7),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(listed, json!({"items": [v.clone()], "size": 1, "total": 7}));
    let yaml = render_raw(
        OutputFormat::Yaml,
        Kind::Subnet,
        std::slice::from_ref(&v),
        false,
        None,
    )
    .unwrap();
    assert!(yaml.starts_with("items:\n- id: i1"), "{yaml}");
    assert!(yaml.contains("total: 1"), "{yaml}");
    assert_eq!(
        render_raw(
            OutputFormat::Name,
            Kind::Subnet,
            std::slice::from_ref(&v),
            false,
            None
        )
        .unwrap(),
        "subnet/n1\n"
    );
    assert_eq!(
        render_raw(OutputFormat::Id, Kind::Subnet, &[v], false, None).unwrap(),
        "i1\n"
    );
}

fn row(kind: Kind, v: Value, refs: &RefNames) -> (Vec<String>, Vec<String>) {
    let out = table(kind, &[v], refs).render();
    let mut lines = out.lines();
    let words = |l: &str| l.split_whitespace().map(str::to_string).collect();
    (words(lines.next().unwrap()), words(lines.next().unwrap()))
}

#[test]
fn compute_instance_table_shows_ips_and_subnets() {
    let refs = RefNames::from([
        ("sub-a".to_string(), "front".to_string()),
        ("sub-b".to_string(), "back".to_string()),
    ]);
    let vm = json!({
        "id": "01939a6e-2222-7000-8000-0000000000c1", "metadata": {"name": "vm1"},
        "spec": {"template": "ocp_virt_vm", "compute_network_attachments": [
            {"subnet": "sub-b", "security_groups": ["sg"]},
            {"subnet": "sub-a", "primary": true}
        ]},
        "status": {"state": "COMPUTE_INSTANCE_STATE_RUNNING",
            "conditions": [{"type": "Ready", "status": "CONDITION_STATUS_TRUE"}],
            "compute_network_attachment_statuses": [
                {"subnet_ref": "sub-b", "ip_address": "10.0.2.7"},
                {"subnet_ref": "sub-a", "ip_address": "10.0.1.5", "primary": true}
            ],
            "internal_ip_address": "10.0.1.5", "external_ip_address": "203.0.113.7"}
    });
    let (head, row) = row(Kind::ComputeInstance, vm, &refs);
    assert_eq!(
        head,
        [
            "NAME",
            "ID",
            "STATE",
            "INTERNAL-IP",
            "EXTERNAL-IP",
            "SUBNETS",
            "MESSAGE"
        ]
    );
    assert_eq!(
        row,
        [
            "vm1",
            "000000c1",
            "RUNNING",
            "10.0.1.5",
            "203.0.113.7",
            "front,back=10.0.2.7"
        ]
    );
    // Still starting: no addresses yet, the pending condition's message.
    let vm = json!({
        "id": "v2", "metadata": {"name": "vm2"},
        "spec": {"compute_network_attachments": [{"subnet": "sub-a", "primary": true}]},
        "status": {"state": "COMPUTE_INSTANCE_STATE_STARTING", "conditions": [
            {"type": "IPDiscoveryComplete", "status": "CONDITION_STATUS_FALSE", "message": "no lease yet"}]}
    });
    let (_, row) = super::tests::row(Kind::ComputeInstance, vm, &refs);
    assert_eq!(
        row,
        [
            "vm2", "v2", "STARTING", "-", "-", "front", "no", "lease", "yet"
        ]
    );
}

#[test]
fn baremetal_table_shows_ips_per_interface() {
    let bm = json!({
        "id": "b1", "metadata": {"name": "s1"},
        "spec": {"host_type": "ht", "network_attachments": [
            {"interface": "data-0", "subnet": "a", "primary": true},
            {"interface": "data-1", "subnet": "b"}]},
        "status": {"state": "BARE_METAL_INSTANCE_STATE_RUNNING",
            "host": "01939a6e-2222-7000-8000-00000000h0st",
            "network_attachment_statuses": [
                {"interface": "data-0", "subnet_ref": "a", "ip_address": "10.0.1.5", "primary": true},
                {"interface": "data-1", "subnet_ref": "b", "ip_address": "10.0.2.9"}],
            "external_ip_address": "203.0.113.8"}
    });
    let refs = RefNames::from([(
        "01939a6e-2222-7000-8000-00000000h0st".to_string(),
        "bm-1".to_string(),
    )]);
    let (head, row) = row(Kind::BareMetalInstance, bm, &refs);
    assert_eq!(
        head,
        [
            "NAME",
            "ID",
            "STATE",
            "HOST",
            "IPS",
            "EXTERNAL-IP",
            "MESSAGE"
        ]
    );
    assert_eq!(
        row,
        [
            "s1",
            "b1",
            "RUNNING",
            "bm-1",
            "data-0=10.0.1.5,data-1=10.0.2.9",
            "203.0.113.8"
        ]
    );
    let bm = json!({"id": "b2", "metadata": {"name": "s2"},
        "status": {"state": "BARE_METAL_INSTANCE_STATE_PROVISIONING", "conditions": [
            {"type": "InventoryAssigned", "status": "CONDITION_STATUS_FALSE",
             "reason": "NoFreeHost", "message": "waiting for a free host"}]}});
    let (_, row) = super::tests::row(Kind::BareMetalInstance, bm, &RefNames::new());
    assert_eq!(
        row.join(" "),
        "s2 b2 PROVISIONING - - - waiting for a free host"
    );
}

#[test]
fn cluster_table_counts_nodes_with_ips() {
    let c = json!({
        "id": "c1", "metadata": {"name": "c1"},
        "spec": {"template": "ocp_4_17_small", "node_sets": {
            "workers": {"host_type": "h", "size": 3, "fabric_interface": "data-0"},
            "infra": {"host_type": "h", "size": 1}}},
        "status": {"state": "CLUSTER_STATE_PROGRESSING",
            "api_endpoint": "10.0.1.240", "ingress_endpoint": "10.0.1.241",
            "node_sets": {"workers": {"agents": [
                {"host": "h1", "ip_address": "10.0.1.10"},
                {"host": "h2", "ip_address": "10.0.1.11"},
                {"host": "h3"}]}}}
    });
    let (head, row) = row(Kind::Cluster, c, &RefNames::new());
    assert_eq!(
        head,
        [
            "NAME",
            "ID",
            "STATE",
            "API",
            "INGRESS",
            "NODES",
            "EXTERNAL-IP",
            "MESSAGE"
        ]
    );
    assert_eq!(
        row,
        [
            "c1",
            "c1",
            "PROGRESSING",
            "10.0.1.240",
            "10.0.1.241",
            "2/4",
            "-"
        ]
    );
    let c = json!({"id": "c2", "metadata": {"name": "c2"},
                   "status": {"state": "CLUSTER_STATE_READY", "external_ip_address": "203.0.113.9"}});
    let (_, row) = super::tests::row(Kind::Cluster, c, &RefNames::new());
    // A cluster has two endpoints: its address is labelled with the one it forwards to.
    assert_eq!(row, ["c2", "c2", "READY", "-", "-", "-", "api=203.0.113.9"]);
}

#[test]
fn external_addresses_come_from_ready_attachments() {
    let att = |target: &str, id: &str, endpoint: Option<&str>, state: &str, addr: &str| {
        let mut spec = json!({"external_ip": "e"});
        spec[target] = json!(id);
        if let Some(e) = endpoint {
            spec["target_endpoint"] = json!(e);
        }
        json!({"spec": spec, "status": {"state": state, "external_ip_address": addr}})
    };
    const READY: &str = "EXTERNAL_IP_ATTACHMENT_STATE_READY";
    let mut names = RefNames::new();
    add_external_ips(
        &mut names,
        &[
            att(
                "cluster",
                "c1",
                Some("EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"),
                READY,
                "203.0.113.5",
            ),
            att(
                "cluster",
                "c2",
                Some("EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS"),
                READY,
                "203.0.113.7",
            ),
            att(
                "cluster",
                "c2",
                Some("EXTERNAL_IP_ATTACHMENT_ENDPOINT_API"),
                READY,
                "203.0.113.6",
            ),
            att(
                "compute_instance",
                "v1",
                None,
                "EXTERNAL_IP_ATTACHMENT_STATE_PENDING",
                "203.0.113.8",
            ),
            att("baremetal_instance", "b1", None, READY, "203.0.113.9"),
        ],
    );
    let cluster = |id: &str| json!({"id": id, "metadata": {"name": id}, "status": {"state": "CLUSTER_STATE_READY"}});
    let out = table(
        Kind::Cluster,
        &[cluster("c1"), cluster("c2"), cluster("c3")],
        &names,
    )
    .render();
    let col: Vec<&str> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(6).unwrap())
        .collect();
    assert_eq!(
        col,
        ["203.0.113.5", "api=203.0.113.6,ingress=203.0.113.7", "-"]
    );
    // A cluster's own status fields win, each labelled with its endpoint.
    let both = json!({"id": "c3", "metadata": {"name": "c3"}, "status": {
        "state": "CLUSTER_STATE_READY",
        "external_ip_address": "198.51.100.1",
        "ingress_external_ip_address": "198.51.100.2"}});
    let ingress_only = json!({"id": "c3", "metadata": {"name": "c3"}, "status": {
        "state": "CLUSTER_STATE_READY",
        "ingress_external_ip_address": "198.51.100.2"}});
    let out = table(Kind::Cluster, &[both, ingress_only], &names).render();
    let col: Vec<&str> = out
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(6).unwrap())
        .collect();
    assert_eq!(
        col,
        [
            "api=198.51.100.1,ingress=198.51.100.2",
            "ingress=198.51.100.2"
        ]
    );
    // A pending attachment is not an address yet; a VM's own status field wins.
    let vm = json!({"id": "v1", "metadata": {"name": "v1"}, "status": {"state": "COMPUTE_INSTANCE_STATE_RUNNING"}});
    let (_, row) = super::tests::row(Kind::ComputeInstance, vm, &names);
    assert_eq!(row[4], "-");
    let bm = json!({"id": "b1", "metadata": {"name": "b1"}, "status": {"state": "BARE_METAL_INSTANCE_STATE_RUNNING"}});
    let (_, row) = super::tests::row(Kind::BareMetalInstance, bm, &names);
    assert_eq!(row[5], "203.0.113.9");
    let bm = json!({"id": "b1", "metadata": {"name": "b1"},
                    "status": {"state": "BARE_METAL_INSTANCE_STATE_RUNNING", "external_ip_address": "198.51.100.1"}});
    let (_, row) = super::tests::row(Kind::BareMetalInstance, bm, &names);
    assert_eq!(row[5], "198.51.100.1");
}

#[test]
fn host_table() {
    let h = json!({
        "id": "01939a6e-2222-7000-8000-0000000000a1", "metadata": {"name": "bm-1"},
        "spec": {"host_type": "ht-id", "pool": "baremetal",
                 "interfaces": [{"name": "data-0", "mac_address": "02:00:00:00:00:01"}]},
        "status": {"state": "HOST_STATE_ASSIGNED",
                   "assigned_to": "01939a6e-2222-7000-8000-0000000000b1"}
    });
    let refs = RefNames::from([("ht-id".to_string(), "bm-standard".to_string())]);
    let (head, row) = row(Kind::Host, h, &refs);
    assert_eq!(
        head,
        [
            "NAME",
            "ID",
            "STATE",
            "TYPE",
            "POOL",
            "ASSIGNED-TO",
            "MESSAGE"
        ]
    );
    assert_eq!(
        row,
        [
            "bm-1",
            "000000a1",
            "ASSIGNED",
            "bm-standard",
            "baremetal",
            "000000b1"
        ]
    );
}

#[test]
fn short_ids() {
    assert_eq!(short_id("01939a6e-2222-7000-8000-0000deadbeef"), "deadbeef");
    assert_eq!(short_id("custom"), "custom");
}
