//! Command-line arguments of the client commands (clap derive).

use std::path::PathBuf;
use std::time::Duration;

use super::kind::Kind;
use super::kind_name::KindParser;
use super::output::OutputFormat;
use super::parse::parse_duration;

mod admin;
mod create;

pub use admin::{
    AdminArgs, AdminCommand, AdminCreateKind, AdminDeleteKind, AdminGetTokens,
    CreateBareMetalInstanceType, CreateBareMetalTemplate, CreateHost, CreateHostType,
    CreateNetworkClass, CreatePool, CreateTenant, CreateToken, DataplaneArgs, DataplaneCommand,
};
pub use create::{
    CidrArgs, CreateArgs, CreateBareMetalInstance, CreateCluster, CreateCommon,
    CreateComputeInstance, CreateExternalIp, CreateExternalIpAttachment, CreateKind,
    CreateNatGateway, CreateSecurityGroup, CreateSubnet, CreateVirtualNetwork, EndpointArg,
    ExternalIpArg, IpFamilyArg, MultiNicOptions, VirtualNetworkArg,
};

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
    Get(Box<GetArgs>),
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
    /// Explain the network: why A can (or cannot) reach B
    Explain(Box<ExplainArgs>),
    /// What the tenant held and moved over a period: resource-seconds and bytes per group
    Usage(Box<UsageArgs>),
}

/// `osac usage`.
#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    #[command(flatten)]
    pub conn: Connection,
    #[command(flatten)]
    pub opts: super::usage::UsageOpts,
}

/// `osac explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    #[command(subcommand)]
    pub what: ExplainWhat,
}

/// What `osac explain` explains.
#[derive(Debug, clap::Subcommand)]
pub enum ExplainWhat {
    /// Whether a packet from --from reaches --to, the hops it crosses and what decides it
    Reach(ReachArgs),
}

/// `osac explain reach`.
#[derive(Debug, clap::Args)]
pub struct ReachArgs {
    #[command(flatten)]
    pub conn: Connection,
    /// Source: computeinstance/NAME, baremetalinstance/NAME, cluster/NAME:api|ingress,
    /// address/IP[@VN], or internet
    #[arg(long, value_name = "END")]
    pub from: String,
    /// Destination, in the same forms as --from
    #[arg(long, value_name = "END")]
    pub to: String,
    /// tcp, udp or icmp
    #[arg(long, default_value = "tcp")]
    pub protocol: String,
    /// Destination port (TCP and UDP)
    #[arg(long)]
    pub port: Option<u32>,
    /// Provider admins: the tenant whose network to explain (private API)
    #[arg(long)]
    pub tenant: Option<String>,
    /// Output format: the explanation in words (default), or the response as json|yaml
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: OutputFormat,
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
    /// hosttype(s), baremetaltemplate(s)/bmt, baremetalinstancetype(s)/bmit, tenant(s), host(s),
    /// computeinstance(s), baremetalinstance(s), cluster(s)
    #[arg(value_parser = KindParser)]
    pub kind: Kind,
    /// Names or ids (all objects when none)
    pub names: Vec<String>,
    /// Output format
    #[arg(long, short = 'o', value_enum, default_value = "table")]
    pub output: OutputFormat,
    /// CEL filter, e.g. 'this.metadata.name.startsWith("web")'
    #[arg(long, conflicts_with = "names")]
    pub filter: Option<String>,
    /// Label selector: KEY=VALUE (also ==) and KEY!=VALUE, comma-separated, all must hold
    /// (sent as a filter, combined with --filter)
    #[arg(long, short = 'l', value_name = "SELECTOR", conflicts_with = "names")]
    pub selector: Option<String>,
    /// Order, e.g. "metadata.name desc"
    #[arg(long, conflicts_with_all = ["names", "sort_by"])]
    pub order: Option<String>,
    /// Sort by a field, ascending: a JSON path such as .metadata.name or
    /// metadata.creation_timestamp (sent as the server's order)
    #[arg(long, value_name = "FIELD", conflicts_with = "names")]
    pub sort_by: Option<String>,
    /// At most this many objects
    #[arg(long, conflicts_with = "names")]
    pub limit: Option<u64>,
    /// Skip this many objects
    #[arg(long, default_value_t = 0, conflicts_with = "names")]
    pub offset: u64,
    /// Keep running and print every change as it happens (the current objects first, as ADDED)
    #[arg(long, short = 'w', conflicts_with_all = ["order", "sort_by", "limit", "offset"])]
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
    #[arg(value_parser = KindParser)]
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
    #[arg(value_parser = KindParser)]
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
    #[arg(value_parser = KindParser)]
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
    #[arg(value_parser = KindParser)]
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
