//! The `osac` client: every command but `osac server`.
//!
//! Entry point: [`run`] with a [`ClientCommand`], a clap `Subcommand` enum that `main.rs`
//! flattens next to its own `Server` variant:
//!
//! ```ignore
//! #[derive(clap::Parser)]
//! struct Cli { #[command(subcommand)] command: Command }
//!
//! #[derive(clap::Subcommand)]
//! enum Command {
//!     /// Run the osac server
//!     Server(ServerArgs),
//!     #[command(flatten)]
//!     Client(osac_cli::client::ClientCommand),
//! }
//!
//! // in an async main:
//! if let Command::Client(cmd) = cli.command {
//!     if let Err(e) = osac_cli::client::run(cmd).await {
//!         osac_cli::client::report_error(&e); // "error: <message> (<code>)" on stderr
//!         std::process::exit(osac_cli::client::exit_code(&e).into());
//!     }
//! }
//! ```
//!
//! Connection options ([`Connection`]: `--url`/`OSAC_URL`, `--token`/`OSAC_TOKEN`,
//! `--config`/`OSAC_CONFIG`, `--ca-file`/`OSAC_CA_FILE`, `--insecure-skip-tls-verify`) are
//! flattened into each command (`create`, `get`, `update`, `label`, `delete`, `events`,
//! `describe`, `admin`, `version`) as global arguments, so they work before or after the
//! subcommand (`osac create --url U subnet …` and `osac create subnet … --url U`). Values
//! missing from flags and environment come from the config file written by `osac login`.
//!
//! API errors print as `<message> (<code>)`; an unreachable server as
//! "cannot reach osac at URL: is `osac server --dev` running?".

mod args;
pub mod complete;
mod config;
mod create;
mod dataplane;
mod describe;
mod events;
mod explain;
mod kind;
pub mod kind_name;
mod login;
mod ops;
mod orphans;
mod output;
mod parse;
mod selector;
mod tokens;
mod usage;
mod wait;
mod watch;
mod workload;

#[cfg(test)]
mod fake_server_tests;

pub use args::{
    AdminArgs, AdminCommand, AdminCreateKind, ClientCommand, Connection, CreateArgs, CreateKind,
    DeleteArgs, DescribeArgs, EventsArgs, GetArgs, LabelArgs, LoginArgs, UpdateArgs, UsageArgs,
    VersionArgs,
};
use args::{AdminDeleteKind, AdminGetTokens, DeleteOpts};
pub use config::{ConfigFile, Endpoint};
pub use kind::{Kind, Scope};
pub use osac_client::{Api, ClientError, tls};
pub use output::OutputFormat;
pub use usage::{UsageFormat, UsageOpts};

use ops::ClientCtx;

impl Connection {
    /// The URL, token and TLS settings after applying flag > environment > config file.
    pub fn endpoint(&self) -> anyhow::Result<Endpoint> {
        let path = self.config.clone().or_else(config::default_config_path);
        config::resolve_with_tls(
            self.url.as_deref(),
            self.token.as_deref(),
            &self.tls(),
            path.as_deref(),
        )
    }

    fn tls(&self) -> tls::TlsOptions {
        tls::TlsOptions {
            ca_file: self.ca_file.clone(),
            insecure_skip_verify: self.insecure_skip_tls_verify,
        }
    }

    /// A REST client for the resolved endpoint (warns on stderr when TLS verification is off).
    pub fn api(&self) -> anyhow::Result<Api> {
        let ep = self.endpoint()?;
        ep.tls.warn_if_insecure();
        Ok(Api::with_tls(&ep.url, &ep.token, &ep.tls)?)
    }

    /// A client for calls that need no token (the token is used when there is one).
    pub fn anonymous_api(&self) -> anyhow::Result<Api> {
        let path = self.config.clone().or_else(config::default_config_path);
        let ep = config::resolve_url(self.url.as_deref(), &self.tls(), path.as_deref())?;
        let token = self.token.clone().unwrap_or(ep.token);
        ep.tls.warn_if_insecure();
        Ok(Api::with_tls(&ep.url, &token, &ep.tls)?)
    }
}

fn ctx(conn: &Connection, scope: Scope) -> anyhow::Result<ClientCtx> {
    Ok(ClientCtx {
        api: conn.api()?,
        scope,
    })
}

/// Runs one client command. Output goes to stdout, progress of `--wait` to stdout (stderr
/// with `-o`); errors are returned for the caller to print with [`report_error`] and exit with
/// [`exit_code`].
pub async fn run(cmd: ClientCommand) -> anyhow::Result<()> {
    match cmd {
        ClientCommand::Login(a) => login::login(&a),
        ClientCommand::Version(a) => version(&a.conn).await,
        ClientCommand::Create(a) => match &a.what {
            // The design's spelling of the provider command.
            CreateKind::Tenant(t) => {
                let what = AdminCreateKind::Tenant(t.clone());
                create::run_admin(&ctx(&a.conn, Scope::Provider)?, &what).await
            }
            what => create::run_tenant(&ctx(&a.conn, Scope::Tenant)?, what).await,
        },
        ClientCommand::Get(a) => ops::get(&ctx(&a.conn, Scope::Tenant)?, &a.opts).await,
        ClientCommand::Update(a) => ops::update(&ctx(&a.conn, Scope::Tenant)?, &a.opts).await,
        ClientCommand::Label(a) => ops::label(&ctx(&a.conn, Scope::Tenant)?, &a.opts).await,
        ClientCommand::Delete(a) => {
            // Tenants are the provider's, as in `osac create tenant`: the design's spelling of
            // `osac admin delete tenant`.
            let scope = match a.opts.kind {
                Kind::Tenant => Scope::Provider,
                _ => Scope::Tenant,
            };
            ops::delete(&ctx(&a.conn, scope)?, &a.opts).await
        }
        ClientCommand::Events(a) => events::run(&ctx(&a.conn, Scope::Tenant)?, &a).await,
        ClientCommand::Describe(a) => describe::run(&ctx(&a.conn, Scope::Tenant)?, &a.opts).await,
        ClientCommand::Explain(a) => match &a.what {
            args::ExplainWhat::Reach(r) => explain::reach(&ctx(&r.conn, Scope::Tenant)?, r).await,
        },
        ClientCommand::Usage(a) => usage::run(&ctx(&a.conn, Scope::Tenant)?, &a.opts).await,
        ClientCommand::Admin(a) => {
            let c = ctx(&a.conn, Scope::Provider)?;
            match &a.command {
                AdminCommand::Create(x) => create::run_admin(&c, &x.what).await,
                AdminCommand::Get(g) => match (&g.tokens, &g.opts) {
                    (Some(AdminGetTokens::Tokens { output }), _) => tokens::list(&c, *output).await,
                    (Some(AdminGetTokens::Replicas { output }), _) => {
                        ops::replicas(&c, *output).await
                    }
                    (None, Some(o)) => ops::get(&c, o).await,
                    (None, None) => {
                        anyhow::bail!("osac admin get: name a kind, `tokens` or `replicas`")
                    }
                },
                AdminCommand::Update(o) => ops::update(&c, o).await,
                AdminCommand::Label(o) => ops::label(&c, o).await,
                AdminCommand::Delete(d) => match d.kind {
                    AdminDeleteKind::Token => tokens::revoke(&c, &d.names, d.force).await,
                    AdminDeleteKind::Object(kind) => {
                        let o = DeleteOpts {
                            kind,
                            names: d.names.clone(),
                            ignore_not_found: d.ignore_not_found,
                            wait: d.wait.clone(),
                        };
                        ops::delete(&c, &o).await
                    }
                },
                AdminCommand::Describe(o) => describe::run(&c, o).await,
                AdminCommand::Managers(m) => ops::managers(&c, m.output).await,
                AdminCommand::Orphans(m) => orphans::run(&c, m.output).await,
                AdminCommand::Dataplane(d) => dataplane::run(&c, d).await,
                AdminCommand::Usage(u) => usage::run(&c, u).await,
            }
        }
    }
}

/// `osac version`: the client's version, then the server's (`GET /version`); an unreachable
/// server is an error after the client's line.
async fn version(conn: &Connection) -> anyhow::Result<()> {
    output::emit(&format!("Client version: {}\n", env!("CARGO_PKG_VERSION")))?;
    let api = conn.anonymous_api()?;
    let server = api.server_version().await?;
    output::emit(&format!("Server version: {server} ({})\n", api.url()))
}

/// Exit status of `osac` for a command's outcome: 0 success, 1 an API or other error,
/// 2 wrong usage (clap reports those itself), 3 a `--wait` that timed out, 4 an object that
/// went FAILED while waited for.
pub const EXIT_USAGE: u8 = 2;

/// The exit status for an error returned by [`run`] (see [`EXIT_USAGE`] for the table).
pub fn exit_code(err: &anyhow::Error) -> u8 {
    match err.downcast_ref::<wait::WaitError>() {
        Some(wait::WaitError::TimedOut(_)) => 3,
        Some(wait::WaitError::Failed(_)) => 4,
        None => 1,
    }
}

/// Prints `error: <message>` (API errors read `<message> (<code>)`) on stderr.
pub fn report_error(err: &anyhow::Error) {
    ops::note(&format!("error: {err:#}"));
}

#[cfg(test)]
mod exit_code_tests {
    use super::*;

    #[test]
    fn wait_outcomes_have_their_own_exit_codes() {
        let timed_out = anyhow::Error::from(wait::WaitError::TimedOut("t".into()));
        let failed = anyhow::Error::from(wait::WaitError::Failed("f".into()));
        assert_eq!(exit_code(&timed_out), 3);
        assert_eq!(exit_code(&failed.context("creating vm1")), 4);
        assert_eq!(exit_code(&anyhow::anyhow!("NOT_FOUND")), 1);
    }
}
