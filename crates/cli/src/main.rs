//! `osac`: the osac-net server and its command-line client.

use clap::{Parser, Subcommand};

/// mimalloc, not glibc malloc: see docs/benchmarks.md, "Allocator".
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "osac",
    version,
    about = "osac-net: tenant networking for an OSAC cloud"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the control plane (REST + gRPC API and controllers)
    #[cfg(feature = "server")]
    Server(Box<osac_server::ServerArgs>),
    /// Print a shell completion script: `source <(osac completion bash)` (commands, options,
    /// kinds, and object names asked of the server)
    Completion {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
    #[command(flatten)]
    Client(osac_cli::client::ClientCommand),
}

fn main() -> std::process::ExitCode {
    // `osac __complete WORDS…`: the object names the completion scripts offer (silent on
    // any failure, so a TAB never prints an error).
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args.get(1).map(String::as_str) == Some(osac_cli::client::complete::COMMAND) {
        use clap::CommandFactory;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        if let Ok(rt) = runtime {
            let out = rt.block_on(osac_cli::client::complete::run(&Cli::command(), &args[2..]));
            let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
        }
        return std::process::ExitCode::SUCCESS;
    }
    // `KIND/NAME` (`osac get subnet/web`) becomes `KIND NAME` before clap reads the line.
    let argv = {
        use clap::CommandFactory;
        osac_cli::client::kind_name::expand(&Cli::command(), std::env::args_os().collect())
    };
    let cli = Cli::parse_from(argv);
    if let Command::Completion { shell } = cli.command {
        use clap::CommandFactory;
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "osac", &mut script);
        script.extend_from_slice(osac_cli::client::complete::hook(shell).as_bytes());
        // `osac completion bash | head` closing the pipe early is not an error.
        let _ = std::io::Write::write_all(&mut std::io::stdout(), &script);
        return std::process::ExitCode::SUCCESS;
    }
    let json_logs = match &cli.command {
        #[cfg(feature = "server")]
        Command::Server(args) => matches!(args.log_format, osac_server::LogFormat::Json),
        _ => false,
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn")),
        )
        .with_writer(std::io::stderr);
    if json_logs {
        // One JSON object a line; span fields (request_id, subject) are in `span`/`spans`,
        // the access line repeats them in its own fields.
        logs.json().with_current_span(true).init()
    } else {
        logs.init()
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            #[cfg(feature = "server")]
            Command::Server(args) => osac_server::run(*args).await,
            Command::Client(cmd) => osac_cli::client::run(cmd).await,
            Command::Completion { .. } => Ok(()),
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(osac_cli::client::exit_code(&e))
        }
    }
}
