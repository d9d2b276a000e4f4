//! Arguments of `osac create …`: one struct per tenant kind, and the options all share.

use std::path::PathBuf;

use super::admin::CreateTenant;
use super::{Connection, WaitArgs};
use crate::client::output::OutputFormat;

/// Options shared by every create command.
#[derive(Debug, Clone, clap::Args)]
pub struct CreateCommon {
    /// Object name (a DNS label, unique per tenant and kind)
    #[arg(long)]
    pub name: Option<String>,
    /// Label KEY=VALUE (repeatable)
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Read the object from a YAML or JSON file (`-` for stdin); flags given as well override
    /// the file's fields
    #[arg(long, short = 'f', value_name = "FILE")]
    pub from_file: Option<PathBuf>,
    #[command(flatten)]
    pub wait: WaitArgs,
    /// Print the created object in this format instead of a confirmation line
    #[arg(long, short = 'o', value_enum, value_name = "FORMAT")]
    pub output: Option<OutputFormat>,
}

/// The VirtualNetwork a Subnet, SecurityGroup or NATGateway belongs to.
#[derive(Debug, Clone, clap::Args)]
pub struct VirtualNetworkArg {
    /// VirtualNetwork (name or id)
    #[arg(long, visible_alias = "vn", required_unless_present = "from_file")]
    pub virtual_network: Option<String>,
}

/// The address ranges of a VirtualNetwork or Subnet.
#[derive(Debug, Clone, clap::Args)]
pub struct CidrArgs {
    /// IPv4 and/or IPv6 CIDR, at most one of each family (a Subnet's inside its
    /// VirtualNetwork's)
    #[arg(
        long = "cidr",
        value_name = "CIDR",
        required_unless_present = "from_file"
    )]
    pub cidrs: Vec<String>,
}

/// The ExternalIP an ExternalIPAttachment forwards or a NATGateway translates to.
#[derive(Debug, Clone, clap::Args)]
pub struct ExternalIpArg {
    /// ExternalIP (name or id); a PENDING one is waited for
    #[arg(
        long = "externalip",
        visible_alias = "external-ip",
        required_unless_present = "from_file"
    )]
    pub external_ip: Option<String>,
}

/// `osac create …`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub what: CreateKind,
}

/// What `osac create` creates.
#[derive(Debug, clap::Subcommand)]
pub enum CreateKind {
    /// A Tenant (provider admin; the same as `osac admin create tenant`)
    #[command(name = "tenant")]
    Tenant(CreateTenant),
    /// A VirtualNetwork
    #[command(name = "virtualnetwork", visible_aliases = ["virtual-network", "vn"])]
    VirtualNetwork(CreateVirtualNetwork),
    /// A Subnet of a VirtualNetwork
    #[command(name = "subnet")]
    Subnet(CreateSubnet),
    /// A SecurityGroup
    #[command(name = "security-group", visible_aliases = ["securitygroup", "sg"])]
    SecurityGroup(CreateSecurityGroup),
    /// An ExternalIP (an address from a pool)
    #[command(name = "externalip", visible_aliases = ["external-ip", "eip"])]
    ExternalIp(CreateExternalIp),
    /// An ExternalIPAttachment (inbound DNAT to a workload)
    #[command(name = "externalipattachment", visible_aliases = ["external-ip-attachment", "eipa"])]
    ExternalIpAttachment(CreateExternalIpAttachment),
    /// A NATGateway (outbound SNAT of a VirtualNetwork)
    #[command(name = "natgateway", visible_aliases = ["nat-gateway", "nat"])]
    NatGateway(CreateNatGateway),
    /// A ComputeInstance (virtual machine) on one or more subnets
    #[command(name = "computeinstance", visible_aliases = ["compute-instance", "vm"])]
    ComputeInstance(CreateComputeInstance),
    /// A BareMetalInstance (a server from the inventory) on one or more subnets
    #[command(name = "baremetalinstance", visible_aliases = ["baremetal-instance", "bmi", "bm"])]
    BareMetalInstance(CreateBareMetalInstance),
    /// A Cluster of bare-metal nodes on one subnet, with API and ingress endpoints
    #[command(name = "cluster")]
    Cluster(CreateCluster),
}

/// The template parameters and the automatic ExternalIP of a workload (a VM, a bare-metal
/// server or a cluster).
#[derive(Debug, clap::Args)]
pub struct WorkloadOptions {
    /// Template parameter KEY=VALUE (repeatable; JSON values such as 4 or true are typed)
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Give the workload ExternalIPs and attachments automatically: one to a machine's primary
    /// IP; two to a cluster, one to its API endpoint and one to its ingress endpoint
    #[arg(long)]
    pub external_ip_attachment: bool,
}

/// What a VM and a bare-metal server take besides their attachments: which one is primary, and
/// the options every workload takes.
#[derive(Debug, clap::Args)]
pub struct MultiNicOptions {
    /// The subnet (as given in --network-attachment) of the primary attachment, instead of
    /// ',primary' on it
    #[arg(long, value_name = "SUBNET", requires = "network_attachments")]
    pub primary: Option<String>,
    #[command(flatten)]
    pub options: WorkloadOptions,
}

/// `osac create computeinstance`.
#[derive(Debug, clap::Args)]
pub struct CreateComputeInstance {
    /// VM template, e.g. ocp_virt_vm
    #[arg(long, required_unless_present = "from_file")]
    pub template: Option<String>,
    /// Network attachment "subnet=NAME[,security-groups=A;B][,primary]" (repeatable; one
    /// per NIC, exactly one primary when several; default: the tenant's default subnet)
    #[arg(long = "network-attachment", value_name = "ATTACHMENT")]
    pub network_attachments: Vec<String>,
    #[command(flatten)]
    pub nics: MultiNicOptions,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac create baremetalinstance`.
#[derive(Debug, clap::Args)]
pub struct CreateBareMetalInstance {
    /// HostType of the server, e.g. h100 (default: the template's, or any HostType serving
    /// the instance type)
    #[arg(long, required_unless_present_any = ["from_file", "template", "instance_type"])]
    pub host_type: Option<String>,
    /// BareMetalTemplate (catalog item) the server is created from, e.g. bcm_h100
    #[arg(long)]
    pub template: Option<String>,
    /// BareMetalInstanceType of the server, e.g. gpu-h100 (attachments name its ports)
    #[arg(long)]
    pub instance_type: Option<String>,
    /// OS image the provisioner installs (default: the provisioner's)
    #[arg(long)]
    pub image: Option<String>,
    /// OpenSSH public key for the default user ("ssh-ed25519 AAAA… comment")
    #[arg(long, conflicts_with = "ssh_public_key_file")]
    pub ssh_public_key: Option<String>,
    /// File holding the OpenSSH public key (e.g. ~/.ssh/id_ed25519.pub)
    #[arg(long, value_name = "PATH")]
    pub ssh_public_key_file: Option<std::path::PathBuf>,
    /// File holding cloud-init / ignition user data (at most 64 KiB)
    #[arg(long, value_name = "PATH")]
    pub user_data_file: Option<std::path::PathBuf>,
    /// Power policy: always (default), halted or manual
    #[arg(long, value_enum)]
    pub run_strategy: Option<RunStrategyArg>,
    /// Opaque value; changing it later (osac update) restarts the server
    #[arg(long)]
    pub restart_trigger: Option<String>,
    /// Network attachment "interface=NAME,subnet=NAME[,security-groups=A;B][,primary]"
    /// (repeatable; every attachment names its interface when several, exactly one primary)
    #[arg(long = "network-attachment", value_name = "ATTACHMENT")]
    pub network_attachments: Vec<String>,
    #[command(flatten)]
    pub nics: MultiNicOptions,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `--run-strategy` of a bare-metal instance.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum RunStrategyArg {
    Always,
    Halted,
    Manual,
}

impl RunStrategyArg {
    /// The proto enum name.
    pub fn enum_name(self) -> &'static str {
        match self {
            RunStrategyArg::Always => "BARE_METAL_RUN_STRATEGY_ALWAYS",
            RunStrategyArg::Halted => "BARE_METAL_RUN_STRATEGY_HALTED",
            RunStrategyArg::Manual => "BARE_METAL_RUN_STRATEGY_MANUAL",
        }
    }
}

/// `osac create cluster`.
#[derive(Debug, clap::Args)]
pub struct CreateCluster {
    /// Cluster template, e.g. ocp_4_17_small
    #[arg(long, required_unless_present = "from_file")]
    pub template: Option<String>,
    /// The cluster's network attachment "subnet=NAME[,security-groups=A;B]" (one per
    /// cluster; default: the tenant's default subnet)
    #[arg(long = "network-attachment", value_name = "ATTACHMENT")]
    pub network_attachment: Option<String>,
    /// Node set NAME=HOST_TYPE,size=N, e.g. workers=h100,size=3 (repeatable)
    #[arg(long = "node-set", value_name = "NAME=HOST_TYPE,size=N")]
    pub node_sets: Vec<String>,
    #[command(flatten)]
    pub options: WorkloadOptions,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac create virtualnetwork`.
#[derive(Debug, clap::Args)]
pub struct CreateVirtualNetwork {
    #[command(flatten)]
    pub cidrs: CidrArgs,
    /// NetworkClass (default: the deployment's default class)
    #[arg(long)]
    pub network_class: Option<String>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac create subnet`.
#[derive(Debug, clap::Args)]
pub struct CreateSubnet {
    #[command(flatten)]
    pub vn: VirtualNetworkArg,
    #[command(flatten)]
    pub cidrs: CidrArgs,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac create security-group`.
#[derive(Debug, clap::Args)]
pub struct CreateSecurityGroup {
    #[command(flatten)]
    pub vn: VirtualNetworkArg,
    /// Ingress rule "protocol:tcp,port:443,source:0.0.0.0/0" (repeatable; port N or N-M;
    /// source any = both families)
    #[arg(long, value_name = "RULE")]
    pub ingress: Vec<String>,
    /// Egress rule "protocol:all,destination:0.0.0.0/0" (repeatable)
    #[arg(long, value_name = "RULE")]
    pub egress: Vec<String>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// IP family flag values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IpFamilyArg {
    Ipv4,
    Ipv6,
}

/// `osac create externalip`.
#[derive(Debug, clap::Args)]
pub struct CreateExternalIp {
    /// ExternalIPPool (default: chosen automatically)
    #[arg(long)]
    pub pool: Option<String>,
    /// Address family when no pool is given (default ipv4)
    #[arg(long, value_enum)]
    pub ip_family: Option<IpFamilyArg>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// Cluster endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EndpointArg {
    Api,
    Ingress,
}

/// `osac create externalipattachment`.
#[derive(Debug, clap::Args)]
pub struct CreateExternalIpAttachment {
    #[command(flatten)]
    pub external_ip: ExternalIpArg,
    /// Target: a ComputeInstance
    #[arg(long, conflicts_with_all = ["cluster", "baremetal_instance"])]
    pub compute_instance: Option<String>,
    /// Target: a Cluster (with --endpoint)
    #[arg(long, conflicts_with = "baremetal_instance", requires = "endpoint")]
    pub cluster: Option<String>,
    /// Target: a BareMetalInstance
    #[arg(long)]
    pub baremetal_instance: Option<String>,
    /// Which cluster endpoint the address forwards to
    #[arg(
        long,
        visible_alias = "target-endpoint",
        value_enum,
        requires = "cluster"
    )]
    pub endpoint: Option<EndpointArg>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac create natgateway`.
#[derive(Debug, clap::Args)]
pub struct CreateNatGateway {
    #[command(flatten)]
    pub vn: VirtualNetworkArg,
    #[command(flatten)]
    pub external_ip: ExternalIpArg,
    #[command(flatten)]
    pub common: CreateCommon,
}
