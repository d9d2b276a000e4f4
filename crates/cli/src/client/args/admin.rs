//! Arguments of `osac admin …`: get/delete/create of provider objects, tokens, managers,
//! replicas and the dataplane.

use super::create::{CreateCommon, IpFamilyArg};
use super::{Connection, DescribeOpts, GetOpts, LabelOpts, UpdateOpts, WaitArgs};
use crate::client::kind::{self, Kind};
use crate::client::output::OutputFormat;

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
    /// What tenants held and moved over a period: resource-seconds and bytes per group
    Usage(crate::client::usage::UsageOpts),
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
    /// Tokens: revoke even the token this command is using (it is refused otherwise; the
    /// last provider-admin token is never revoked)
    #[arg(long)]
    pub force: bool,
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
    /// A BareMetalInstanceType (bare-metal flavor: network ports and the HostTypes serving it)
    #[command(
        name = "baremetalinstancetype",
        visible_aliases = ["baremetal-instance-type", "bmit"]
    )]
    BareMetalInstanceType(CreateBareMetalInstanceType),
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
    /// Give every tenant a default NATGateway (the server's default when neither flag is given)
    #[arg(long, conflicts_with = "no_nat_gateway")]
    pub enable_nat_gateway: bool,
    /// Onboard tenants without a default NATGateway
    #[arg(long)]
    pub no_nat_gateway: bool,
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

/// `osac admin create baremetalinstancetype`.
#[derive(Debug, clap::Args)]
pub struct CreateBareMetalInstanceType {
    /// Network port NAME:ROLE:TYPE:GBPS, e.g. data-0:fabric:ethernet:100 (repeatable; roles
    /// fabric, management, storage, lifecycle; types ethernet, infiniband)
    #[arg(
        long = "port",
        value_name = "NAME:ROLE:TYPE:GBPS",
        required_unless_present = "from_file"
    )]
    pub ports: Vec<String>,
    /// HostType whose hosts serve the type (repeatable)
    #[arg(
        long = "host-type",
        value_name = "HOST_TYPE",
        required_unless_present = "from_file"
    )]
    pub host_types: Vec<String>,
    /// Title
    #[arg(long)]
    pub title: Option<String>,
    /// Description
    #[arg(long)]
    pub description: Option<String>,
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
