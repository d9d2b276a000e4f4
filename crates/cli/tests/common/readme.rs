//! The command lines of the README's tenant flows, as a user types them but without `--wait`
//! (run with [`Env::ok_line`](super::Env::ok_line), which appends [`WAIT`] or [`WAIT_60S`]
//! where a test waits): one place for the networking and workloads the CLI suites create.

/// `--wait` after a create.
pub const WAIT: &[&str] = &["--wait"];
/// `--wait --timeout 60s` after a workload's create (provisioning takes a while).
pub const WAIT_60S: &[&str] = &["--wait", "--timeout", "60s"];

pub const MY_NET: &str = "create virtualnetwork --cidr 10.0.0.0/16 --name my-net";
pub const MY_SUBNET: &str =
    "create subnet --virtual-network my-net --cidr 10.0.1.0/24 --name my-subnet";
pub const MY_SUBNET_B: &str =
    "create subnet --virtual-network my-net --cidr 10.0.2.0/24 --name my-subnet-b";
pub const MY_SG: &str = "create security-group --virtual-network my-net --name my-sg \
    --ingress protocol:tcp,port:443,source:0.0.0.0/0";
pub const NAT_IP: &str = "create externalip --name nat-ip";
pub const MY_NAT: &str =
    "create natgateway --virtual-network my-net --externalip nat-ip --name my-nat";

/// Single-call creation: a VM on the tenant's default networking, with an external address.
pub const VM1: &str = "create computeinstance --template small --external-ip-attachment --name vm1";

/// Workloads on `my-net`: a VM, a two-NIC bare-metal server (primary on data-0), a three-node
/// cluster, and an ExternalIP attached to the cluster's API endpoint.
pub const MY_VM: &str = "create computeinstance --template ocp_virt_vm \
    --network-attachment subnet=my-subnet,security-groups=my-sg --name my-vm";
/// A two-NIC VM whose primary is named by its subnet (`--primary`, as the PRD writes it).
pub const MY_VM2: &str = "create computeinstance --template ocp_virt_vm \
    --network-attachment subnet=my-subnet --network-attachment subnet=my-subnet-b \
    --primary my-subnet-b --name my-vm2";
pub const S1: &str = "create baremetalinstance --host-type bm-standard \
    --network-attachment interface=data-0,subnet=my-subnet,primary \
    --network-attachment interface=data-1,subnet=my-subnet-b --name s1";
pub const C1: &str = "create cluster --template ocp_4_17_small \
    --network-attachment subnet=my-subnet --node-set workers=bm-standard,size=3 --name c1";
pub const API_IP: &str = "create externalip --pool external-pool-1 --name api-ip";
pub const C1_API: &str =
    "create externalipattachment --externalip api-ip --cluster c1 --endpoint api --name c1-api";
