//! Command-line arguments of the client commands (clap derive).

use std::path::PathBuf;
use std::time::Duration;

use super::kind::{self, Kind};
use super::output::OutputFormat;
use super::parse::parse_duration;

/// Where the server is and who is calling. Every command but `login` takes these options
/// (they are global within the command, so they may come before or after the subcommand).
/// Precedence: flag, then environment variable, then the config file.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Connection")]
pub struct Connection {
    /// osac server URL, e.g. http://127.0.0.1:8000
    #[arg(long, env = "OSAC_URL", global = true, value_name = "URL")]
    pub url: Option<String>,
    /// Bearer token
    #[arg(
        long,
        env = "OSAC_TOKEN",
        global = true,
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Config file written by `osac login` [default: ~/.config/osac/config.json]
    #[arg(long, env = "OSAC_CONFIG", global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// PEM CA certificate(s) to trust for an https:// server instead of the system roots
    #[arg(long, env = "OSAC_CA_FILE", global = true, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Do not verify the server's certificate: DANGEROUS, anyone on the network path can read
    /// your token
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
}

/// `--wait` and `--timeout`.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// Wait until the object is ready (create) or gone (delete), showing its state
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits (120, 90s, 5m)
    #[arg(long, default_value = "120s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,
}

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

/// The commands of the `osac` client. `main.rs` flattens this enum next to `server`.
#[derive(Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Save the server URL and token in the config file
    Login(LoginArgs),
    /// Print the client's and the server's versions
    Version(VersionArgs),
    /// Create a tenant object
    Create(Box<CreateArgs>),
    /// List or show objects
    Get(GetArgs),
    /// Change an object (security group rules, or fields from a file)
    Update(Box<UpdateArgs>),
    /// Set (KEY=VALUE) or remove (KEY-) labels of an object
    Label(LabelArgs),
    /// Delete objects
    Delete(DeleteArgs),
    /// Show what happened to objects (state changes, onboarding, cleanup, refused requests)
    Events(EventsArgs),
    /// Show one object: state, spec, conditions, what it uses, what uses it, recent events
    Describe(DescribeArgs),
    /// Provider administration (private API): network classes, pools, host types, tenants,
    /// hosts, tokens, managers
    Admin(Box<AdminArgs>),
}

/// `osac login`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoginArgs {
    /// osac server URL
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Bearer token
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Take URL and token from the dev-credentials.json written by `osac server --dev`
    #[arg(long, value_name = "PATH")]
    pub dev_credentials: Option<PathBuf>,
    /// Config file to write [default: ~/.config/osac/config.json]
    #[arg(long, env = "OSAC_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// PEM CA certificate(s) that sign the server's certificate; remembered and used for
    /// every later call
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Do not verify the server's certificate, now and for every later call: DANGEROUS,
    /// anyone on the network path can read your token
    #[arg(long)]
    pub insecure_skip_tls_verify: bool,
}

/// `osac version`.
#[derive(Debug, clap::Args)]
pub struct VersionArgs {
    #[command(flatten)]
    pub conn: Connection,
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
    /// Template parameter KEY=VALUE (repeatable; JSON values such as 4 or true are typed)
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Give the instance an ExternalIP and an attachment to its primary IP automatically
    #[arg(long)]
    pub external_ip_attachment: bool,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac create baremetalinstance`.
#[derive(Debug, clap::Args)]
pub struct CreateBareMetalInstance {
    /// HostType of the server, e.g. h100 (default: the template's)
    #[arg(long, required_unless_present_any = ["from_file", "template"])]
    pub host_type: Option<String>,
    /// BareMetalTemplate (catalog item) the server is created from, e.g. bcm_h100
    #[arg(long)]
    pub template: Option<String>,
    /// Network attachment "interface=NAME,subnet=NAME[,security-groups=A;B][,primary]"
    /// (repeatable; every attachment names its interface when several, exactly one primary)
    #[arg(long = "network-attachment", value_name = "ATTACHMENT")]
    pub network_attachments: Vec<String>,
    /// Template parameter KEY=VALUE (repeatable)
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Give the server an ExternalIP and an attachment to its primary IP automatically
    #[arg(long)]
    pub external_ip_attachment: bool,
    #[command(flatten)]
    pub common: CreateCommon,
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
    /// Template parameter KEY=VALUE (repeatable)
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Give the cluster an ExternalIP and an attachment to its API endpoint automatically
    #[arg(long)]
    pub external_ip_attachment: bool,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac create virtualnetwork`.
#[derive(Debug, clap::Args)]
pub struct CreateVirtualNetwork {
    /// IPv4 and/or IPv6 CIDR (at most one of each family)
    #[arg(
        long = "cidr",
        value_name = "CIDR",
        required_unless_present = "from_file"
    )]
    pub cidrs: Vec<String>,
    /// NetworkClass (default: the deployment's default class)
    #[arg(long)]
    pub network_class: Option<String>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac create subnet`.
#[derive(Debug, clap::Args)]
pub struct CreateSubnet {
    /// VirtualNetwork (name or id)
    #[arg(long, visible_alias = "vn", required_unless_present = "from_file")]
    pub virtual_network: Option<String>,
    /// IPv4 and/or IPv6 CIDR inside the VirtualNetwork's
    #[arg(
        long = "cidr",
        value_name = "CIDR",
        required_unless_present = "from_file"
    )]
    pub cidrs: Vec<String>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac create security-group`.
#[derive(Debug, clap::Args)]
pub struct CreateSecurityGroup {
    /// VirtualNetwork (name or id)
    #[arg(long, visible_alias = "vn", required_unless_present = "from_file")]
    pub virtual_network: Option<String>,
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
    /// ExternalIP (name or id); unattached (a PENDING one is waited for)
    #[arg(
        long = "externalip",
        visible_alias = "external-ip",
        required_unless_present = "from_file"
    )]
    pub external_ip: Option<String>,
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
    /// VirtualNetwork (name or id)
    #[arg(long, visible_alias = "vn", required_unless_present = "from_file")]
    pub virtual_network: Option<String>,
    /// ExternalIP (name or id) used as the source address
    #[arg(
        long = "externalip",
        visible_alias = "external-ip",
        required_unless_present = "from_file"
    )]
    pub external_ip: Option<String>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac events`.
#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    #[command(flatten)]
    pub conn: Connection,
    /// Only the events of this object, e.g. subnet/my-subnet (kind aliases as in `get`)
    #[arg(long = "for", value_name = "KIND/NAME")]
    pub target: Option<String>,
    /// Output format
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: OutputFormat,
    /// At most this many events [default: all with --for, else the latest 100]
    #[arg(long)]
    pub limit: Option<u64>,
    /// Skip this many events (the newest ones without --for)
    #[arg(long, default_value_t = 0)]
    pub offset: u64,
    /// Keep running and print events as they are recorded (the retained ones first)
    #[arg(long, short = 'w', conflicts_with_all = ["limit", "offset"])]
    pub watch: bool,
}

/// `osac get`.
#[derive(Debug, clap::Args)]
pub struct GetArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(flatten)]
    pub opts: GetOpts,
}

/// `get` options (tenant and admin).
#[derive(Debug, Clone, clap::Args)]
pub struct GetOpts {
    /// Kind: virtualnetwork(s)/vn, subnet(s), securitygroup(s)/sg, externalip(s)/eip,
    /// externalipattachment(s), natgateway(s)/nat, externalippool(s)/pool, networkclass(es),
    /// hosttype(s), tenant(s), host(s), computeinstance(s), baremetalinstance(s), cluster(s)
    #[arg(value_parser = kind::parse)]
    pub kind: Kind,
    /// Names or ids (all objects when none)
    pub names: Vec<String>,
    /// Output format
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: OutputFormat,
    /// CEL filter, e.g. 'this.metadata.name.startsWith("web")'
    #[arg(long, conflicts_with = "names")]
    pub filter: Option<String>,
    /// Order, e.g. "metadata.name desc"
    #[arg(long, conflicts_with = "names")]
    pub order: Option<String>,
    /// At most this many objects
    #[arg(long, conflicts_with = "names")]
    pub limit: Option<u64>,
    /// Skip this many objects
    #[arg(long, default_value_t = 0, conflicts_with = "names")]
    pub offset: u64,
    /// Keep running and print every change as it happens (the current objects first, as ADDED)
    #[arg(long, short = 'w', conflicts_with_all = ["order", "limit", "offset"])]
    pub watch: bool,
}

/// `osac describe`.
#[derive(Debug, clap::Args)]
pub struct DescribeArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(flatten)]
    pub opts: DescribeOpts,
}

/// `describe` options (tenant and admin).
#[derive(Debug, Clone, clap::Args)]
pub struct DescribeOpts {
    /// Kind (see `osac get --help`)
    #[arg(value_parser = kind::parse)]
    pub kind: Kind,
    /// Name or id
    pub name: String,
}

/// `osac delete`.
#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(flatten)]
    pub opts: DeleteOpts,
}

/// `delete` options (tenant and admin).
#[derive(Debug, Clone, clap::Args)]
pub struct DeleteOpts {
    /// Kind (see `osac get --help`)
    #[arg(value_parser = kind::parse)]
    pub kind: Kind,
    /// Names or ids
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Succeed when an object does not exist
    #[arg(long)]
    pub ignore_not_found: bool,
    #[command(flatten)]
    pub wait: WaitArgs,
}

/// `osac label`.
#[derive(Debug, clap::Args)]
pub struct LabelArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(flatten)]
    pub opts: LabelOpts,
}

/// `label` options (tenant and admin).
#[derive(Debug, Clone, clap::Args)]
pub struct LabelOpts {
    /// Kind (see `osac get --help`)
    #[arg(value_parser = kind::parse)]
    pub kind: Kind,
    /// Name or id
    pub name: String,
    /// KEY=VALUE to set, KEY- to remove
    #[arg(required = true, value_name = "KEY=VALUE|KEY-")]
    pub changes: Vec<String>,
}

/// `osac update`.
#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(flatten)]
    pub opts: UpdateOpts,
}

/// `update` options (tenant and admin).
#[derive(Debug, Clone, clap::Args)]
pub struct UpdateOpts {
    /// Kind (see `osac get --help`)
    #[arg(value_parser = kind::parse)]
    pub kind: Kind,
    /// Name or id
    pub name: String,
    /// Security groups: replace the ingress rules with these (repeatable)
    #[arg(long, value_name = "RULE")]
    pub ingress: Vec<String>,
    /// Security groups: replace the egress rules with these (repeatable)
    #[arg(long, value_name = "RULE")]
    pub egress: Vec<String>,
    /// Security groups: remove every ingress rule
    #[arg(long, conflicts_with = "ingress")]
    pub clear_ingress: bool,
    /// Security groups: remove every egress rule
    #[arg(long, conflicts_with = "egress")]
    pub clear_egress: bool,
    /// Security groups: add this ingress rule to the existing ones (repeatable; a rule that
    /// is already there is left as it is)
    #[arg(long, value_name = "RULE", conflicts_with_all = ["ingress", "clear_ingress"])]
    pub add_ingress: Vec<String>,
    /// Security groups: remove this ingress rule (repeatable; it must exist)
    #[arg(long, value_name = "RULE", conflicts_with_all = ["ingress", "clear_ingress"])]
    pub remove_ingress: Vec<String>,
    /// Security groups: add this egress rule to the existing ones (repeatable)
    #[arg(long, value_name = "RULE", conflicts_with_all = ["egress", "clear_egress"])]
    pub add_egress: Vec<String>,
    /// Security groups: remove this egress rule (repeatable; it must exist)
    #[arg(long, value_name = "RULE", conflicts_with_all = ["egress", "clear_egress"])]
    pub remove_egress: Vec<String>,
    /// Tenants: set quotas NAME=VALUE[,NAME=VALUE…] (repeatable; VALUE a number, `unlimited`,
    /// or `default` to fall back to the provider default)
    #[arg(long = "quota", value_name = "NAME=VALUE,…")]
    pub quotas: Vec<String>,
    /// Fields to change, from a YAML or JSON file (`-` for stdin)
    #[arg(long, short = 'f', value_name = "FILE")]
    pub from_file: Option<PathBuf>,
    /// Update mask (comma-separated field paths); default: the fields present in the file
    #[arg(long, requires = "from_file")]
    pub update_mask: Option<String>,
    /// Print the updated object in this format instead of a confirmation line
    #[arg(long, short = 'o', value_enum, value_name = "FORMAT")]
    pub output: Option<OutputFormat>,
}

/// `osac admin …`.
#[derive(Debug, clap::Args)]
pub struct AdminArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// Provider commands.
#[derive(Debug, clap::Subcommand)]
pub enum AdminCommand {
    /// Create a provider object or a token
    Create(Box<AdminCreateArgs>),
    /// List or show provider objects, list bearer tokens (`osac admin get tokens`) or the
    /// control-plane replicas (`osac admin get replicas`)
    Get(AdminGetArgs),
    /// Change a provider object from a file
    Update(Box<UpdateOpts>),
    /// Set or remove labels of a provider object
    Label(LabelOpts),
    /// Delete provider objects, or revoke a bearer token (`osac admin delete token ID`)
    Delete(AdminDeleteArgs),
    /// Show one provider object: state, spec, what it uses, what uses it, recent events
    Describe(DescribeOpts),
    /// List the registered networking managers
    Managers(ManagersArgs),
    /// List what workload cleanups gave up on (labelled osac.openshift.io/orphaned)
    Orphans(ManagersArgs),
    /// The real (linux) dataplane: garbage collection
    Dataplane(DataplaneArgs),
}

/// `osac admin get`: provider objects, or `tokens`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct AdminGetArgs {
    #[command(subcommand)]
    pub tokens: Option<AdminGetTokens>,
    #[command(flatten)]
    pub opts: Option<GetOpts>,
}

/// `osac admin get tokens`.
#[derive(Debug, clap::Subcommand)]
pub enum AdminGetTokens {
    /// Bearer tokens: id, subject, role, tenant, creation and expiry (never the secrets)
    #[command(name = "tokens", visible_alias = "token")]
    Tokens {
        /// Output format
        #[arg(long, short = 'o', value_enum, default_value = "table")]
        output: OutputFormat,
    },
    /// Control-plane replicas sharing the database: live or gone, and the controller shards
    /// each one holds
    #[command(name = "replicas", visible_alias = "replica")]
    Replicas {
        /// Output format
        #[arg(long, short = 'o', value_enum, default_value = "table")]
        output: OutputFormat,
    },
}

/// `osac admin delete`: provider objects, or `token ID…`.
#[derive(Debug, clap::Args)]
pub struct AdminDeleteArgs {
    /// Kind (see `osac get --help`), or `token` to revoke bearer tokens by id
    #[arg(value_parser = AdminDeleteKind::parse)]
    pub kind: AdminDeleteKind,
    /// Names or ids (token ids for `token`)
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Succeed when an object does not exist
    #[arg(long)]
    pub ignore_not_found: bool,
    #[command(flatten)]
    pub wait: WaitArgs,
}

/// What `osac admin delete` removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminDeleteKind {
    /// Bearer tokens (revoked at once on every server).
    Token,
    /// Provider objects of a kind.
    Object(Kind),
}

impl AdminDeleteKind {
    /// `token`/`tokens`, or a kind as `osac get` names it.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "token" | "tokens" => Ok(Self::Token),
            _ => kind::parse(s).map(Self::Object),
        }
    }
}

/// `osac admin dataplane …`.
#[derive(Debug, clap::Args)]
pub struct DataplaneArgs {
    #[command(subcommand)]
    pub command: DataplaneCommand,
}

/// Dataplane commands.
#[derive(Debug, clap::Subcommand)]
pub enum DataplaneCommand {
    /// Remove kernel state (namespaces, bridges, dnsmasq) of objects the store no longer has
    Gc(DataplaneGcArgs),
}

/// `osac admin dataplane gc`.
#[derive(Debug, clap::Args)]
pub struct DataplaneGcArgs {
    /// Only consider these namespaces (several deployments sharing one machine)
    #[arg(long = "scope", value_name = "NAMESPACE")]
    pub scope: Vec<String>,
    /// Output format (table prints a summary)
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: OutputFormat,
}

/// `osac admin create`.
#[derive(Debug, clap::Args)]
pub struct AdminCreateArgs {
    #[command(subcommand)]
    pub what: AdminCreateKind,
}

/// What `osac admin create` creates.
#[derive(Debug, clap::Subcommand)]
pub enum AdminCreateKind {
    /// A NetworkClass
    #[command(name = "network-class", visible_aliases = ["networkclass", "nc"])]
    NetworkClass(CreateNetworkClass),
    /// An ExternalIPPool
    #[command(name = "pool", visible_aliases = ["externalippool", "external-ip-pool"])]
    Pool(CreatePool),
    /// A HostType
    #[command(name = "host-type", visible_aliases = ["hosttype", "ht"])]
    HostType(CreateHostType),
    /// A BareMetalTemplate (catalog item for bare-metal instances)
    #[command(
        name = "baremetaltemplate",
        visible_aliases = ["baremetal-template", "bmt"]
    )]
    BareMetalTemplate(CreateBareMetalTemplate),
    /// A Tenant (onboarding creates its default networking)
    #[command(name = "tenant")]
    Tenant(CreateTenant),
    /// A Host (inventory)
    #[command(name = "host")]
    Host(CreateHost),
    /// A bearer token (printed on stdout)
    #[command(name = "token")]
    Token(CreateToken),
}

/// `osac admin create network-class`.
#[derive(Debug, clap::Args)]
pub struct CreateNetworkClass {
    /// Fabric manager (registered, role fabric)
    #[arg(long, required_unless_present = "from_file")]
    pub fabric_manager: Option<String>,
    /// k8s manager (registered, role k8s)
    #[arg(long)]
    pub k8s_manager: Option<String>,
    /// Make this the default class
    #[arg(long = "default", visible_alias = "is-default")]
    pub is_default: bool,
    /// Title
    #[arg(long)]
    pub title: Option<String>,
    /// Description
    #[arg(long)]
    pub description: Option<String>,
    /// Tenant default VirtualNetwork CIDR (one per family)
    #[arg(long = "default-vn-cidr", value_name = "CIDR")]
    pub default_vn_cidrs: Vec<String>,
    /// Tenant default Subnet CIDR (one per family)
    #[arg(long = "default-subnet-cidr", value_name = "CIDR")]
    pub default_subnet_cidrs: Vec<String>,
    /// Default SecurityGroup ingress rule (repeatable)
    #[arg(long = "default-ingress", value_name = "RULE")]
    pub default_ingress: Vec<String>,
    /// Default SecurityGroup egress rule (repeatable)
    #[arg(long = "default-egress", value_name = "RULE")]
    pub default_egress: Vec<String>,
    /// Give every tenant a default NATGateway
    #[arg(long)]
    pub enable_nat_gateway: bool,
    /// IPv4 prefix length of the VIP block reserved at the top of each subnet (e.g. 28)
    #[arg(long, value_name = "N")]
    pub vip_prefix_length: Option<u32>,
    /// Disable a capability: ipv4, ipv6, dual-stack, dpu (repeatable)
    #[arg(long = "disable-capability", value_name = "CAPABILITY")]
    pub disable_capabilities: Vec<String>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac admin create pool`.
#[derive(Debug, clap::Args)]
pub struct CreatePool {
    /// CIDR (repeatable or comma-separated; one family)
    #[arg(
        long = "cidr",
        visible_alias = "cidrs",
        value_name = "CIDR",
        value_delimiter = ',',
        required_unless_present = "from_file"
    )]
    pub cidrs: Vec<String>,
    /// Address family (default: the CIDRs')
    #[arg(long, value_enum)]
    pub ip_family: Option<IpFamilyArg>,
    /// NetworkClass whose fabric allocates the pool's addresses (default: the default class)
    #[arg(long)]
    pub network_class: Option<String>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac admin create host-type`.
#[derive(Debug, clap::Args)]
pub struct CreateHostType {
    /// Interface NAME:ROLE[:DESCRIPTION], in order (repeatable; none for VM types)
    #[arg(long = "interface", value_name = "NAME:ROLE")]
    pub interfaces: Vec<String>,
    /// Title
    #[arg(long)]
    pub title: Option<String>,
    /// Description
    #[arg(long)]
    pub description: Option<String>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac admin create baremetaltemplate`.
#[derive(Debug, clap::Args)]
pub struct CreateBareMetalTemplate {
    /// HostType the template's servers run on
    #[arg(long, required_unless_present = "from_file")]
    pub host_type: Option<String>,
    /// Title
    #[arg(long)]
    pub title: Option<String>,
    /// Description
    #[arg(long)]
    pub description: Option<String>,
    /// Default template parameter KEY=VALUE (repeatable; an instance's own values win)
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac admin create tenant` (also `osac create tenant`).
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("name", |a| a.required_unless_present("from_file")))]
pub struct CreateTenant {
    /// DNS domain of the tenant (repeatable)
    #[arg(long = "domain", value_name = "DOMAIN")]
    pub domains: Vec<String>,
    /// Quotas NAME=VALUE[,NAME=VALUE…] (repeatable; VALUE a number or `unlimited`; unset
    /// quotas take the provider default), e.g. `--quota subnets=20,clusters=2`
    #[arg(long = "quota", value_name = "NAME=VALUE,…")]
    pub quotas: Vec<String>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// `osac admin create host`.
#[derive(Debug, clap::Args)]
pub struct CreateHost {
    /// HostType
    #[arg(long, required_unless_present = "from_file")]
    pub host_type: Option<String>,
    /// Interfaces NAME=MAC[,NAME=MAC…], one per interface of the HostType (repeatable)
    #[arg(long = "interface", value_name = "NAME=MAC,…")]
    pub interfaces: Vec<String>,
    /// Inventory pool: baremetal (BareMetalInstances) or caas (cluster agents)
    #[arg(long, value_enum)]
    pub pool: Option<HostPoolArg>,
    #[command(flatten)]
    pub common: CreateCommon,
}

/// Host inventory pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HostPoolArg {
    Baremetal,
    Caas,
}

impl HostPoolArg {
    /// The pool as the API names it.
    pub fn as_str(self) -> &'static str {
        match self {
            HostPoolArg::Baremetal => "baremetal",
            HostPoolArg::Caas => "caas",
        }
    }
}

/// Token roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RoleArg {
    ProviderAdmin,
    TenantAdmin,
    TenantUser,
}

impl RoleArg {
    /// The role as the API names it.
    pub fn as_str(self) -> &'static str {
        match self {
            RoleArg::ProviderAdmin => "provider-admin",
            RoleArg::TenantAdmin => "tenant-admin",
            RoleArg::TenantUser => "tenant-user",
        }
    }
}

/// `osac admin create token`.
#[derive(Debug, clap::Args)]
pub struct CreateToken {
    /// Tenant the token acts in (required for tenant roles)
    #[arg(long)]
    pub tenant: Option<String>,
    /// Role
    #[arg(long, value_enum)]
    pub role: RoleArg,
    /// Subject (user name) recorded as creator
    #[arg(long)]
    pub subject: Option<String>,
    /// Lifetime, e.g. 30m, 24h, 7d (default: no expiry)
    #[arg(long, conflicts_with = "expires_at")]
    pub expires_in: Option<String>,
    /// Expiry time, RFC 3339 (e.g. 2030-01-01T00:00:00Z)
    #[arg(long)]
    pub expires_at: Option<String>,
}

/// `osac admin managers`.
#[derive(Debug, clap::Args)]
pub struct ManagersArgs {
    /// Output format
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: OutputFormat,
}
