//! Shell completion of object names, asked of the server.
//!
//! `osac completion bash|zsh|fish` prints clap's script (commands, options, kinds) followed by
//! a small hook of ours: when the word under the cursor is an object's name — after the kind
//! of `get`, `describe`, `delete`, `label` or `update` (also under `admin`), or a `KIND/…`
//! word — the hook runs the hidden `osac __complete WORDS…` (the words of the line from
//! `osac` on, the last one being the word being completed) and offers what it prints, one
//! candidate a line: the caller's objects of that kind whose names start with the word.
//!
//! `__complete` is silent: no login, an unreachable server, a refused token or a slow answer
//! (more than [`TIMEOUT`]) print nothing and exit 0, so a TAB never shows an error or hangs.

use std::path::PathBuf;
use std::time::Duration;

use osac_client::ListQuery;

use super::Connection;
use super::kind::{self, Kind, Scope};

/// How long a completion waits for the server.
pub const TIMEOUT: Duration = Duration::from_secs(3);

/// The name of the hidden command the scripts call.
pub const COMMAND: &str = "__complete";

/// The commands whose first positional is a kind followed by names, and how many names.
const NAME_COMMANDS: [(&str, Names); 5] = [
    ("get", Names::Many),
    ("delete", Names::Many),
    ("describe", Names::One),
    ("label", Names::One),
    ("update", Names::One),
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Names {
    One,
    Many,
}

/// What the word under the cursor is: a name of `kind`, to be printed after `prefix`.
#[derive(Debug)]
pub struct Target {
    pub kind: Kind,
    pub scope: Scope,
    /// What precedes the name in the word (`subnet/` for `subnet/we`), kept as typed.
    pub prefix: String,
    /// The start of the name typed so far.
    pub partial: String,
    pub conn: Connection,
}

/// Reads a command line (its words from `osac` on, the last one being completed) and says
/// whether an object name is being completed. `cmd` is the whole `osac` command definition.
pub fn target(cmd: &clap::Command, words: &[String]) -> Option<Target> {
    let (current, before) = words.get(1..)?.split_last()?;
    if current.starts_with('-') {
        return None;
    }
    let mut cmd = cmd.clone();
    cmd.build();
    let mut at = &cmd;
    let mut admin = false;
    let mut names: Option<Names> = None;
    let mut kind: Option<Kind> = None;
    let mut positionals = 0usize;
    let mut conn = Connection::default();
    let mut words = before.iter();
    while let Some(word) = words.next() {
        if word.len() > 1 && word.starts_with('-') {
            let (flag, inline) = match word.split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (word.as_str(), None),
            };
            let value = if inline.is_none() && takes_value(at, word) {
                // The word being completed is this option's value, not a name.
                Some(words.next()?.clone())
            } else {
                inline
            };
            connection_flag(&mut conn, flag, value);
            continue;
        }
        match names {
            None => {
                let sub = at.find_subcommand(word)?;
                admin |= sub.get_name() == "admin";
                names = NAME_COMMANDS
                    .iter()
                    .find(|(name, _)| *name == sub.get_name())
                    .map(|(_, n)| *n);
                at = sub;
            }
            Some(_) if kind.is_none() => {
                let k = word.split_once('/').map_or(word.as_str(), |(k, _)| k);
                kind = Some(kind::parse(k).ok()?);
                positionals = usize::from(word.contains('/'));
            }
            Some(_) => positionals += 1,
        }
    }
    let names = names?;
    let (kind, prefix, partial) = match kind {
        None => {
            let (k, partial) = current.split_once('/')?;
            (kind::parse(k).ok()?, format!("{k}/"), partial.to_string())
        }
        Some(kind) => {
            if names == Names::One && positionals > 0 {
                return None;
            }
            // `KIND/NAME` words after the first repeat the kind.
            match current.split_once('/') {
                Some((k, partial)) if kind::parse(k).ok() == Some(kind) => {
                    (kind, format!("{k}/"), partial.to_string())
                }
                _ => (kind, String::new(), current.clone()),
            }
        }
    };
    let scope = if admin || kind.access(Scope::Tenant) == kind::Access::None {
        Scope::Provider
    } else {
        Scope::Tenant
    };
    fill_from_env(&mut conn);
    Some(Target {
        kind,
        scope,
        prefix,
        partial,
        conn,
    })
}

/// Whether the option `word` of `cmd` (or a global one of its parents) takes a value.
fn takes_value(cmd: &clap::Command, word: &str) -> bool {
    let found = if let Some(long) = word.strip_prefix("--") {
        cmd.get_arguments().find(|a| a.get_long() == Some(long))
    } else {
        if word.chars().count() != 2 {
            return false; // `-ojson`: the value is attached
        }
        let short = word.chars().nth(1);
        cmd.get_arguments().find(|a| a.get_short() == short)
    };
    // The connection options are global: known even before the subcommand that declares them.
    let connection = matches!(word, "--url" | "--token" | "--config" | "--ca-file");
    connection || found.is_some_and(|a| a.get_action().takes_values())
}

fn connection_flag(conn: &mut Connection, flag: &str, value: Option<String>) {
    match flag {
        "--url" => conn.url = value,
        "--token" => conn.token = value,
        "--config" => conn.config = value.map(PathBuf::from),
        "--ca-file" => conn.ca_file = value.map(PathBuf::from),
        "--insecure-skip-tls-verify" => conn.insecure_skip_tls_verify = true,
        _ => {}
    }
}

/// Flags first, then the environment, as the commands themselves read them.
fn fill_from_env(conn: &mut Connection) {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    conn.url = conn.url.take().or_else(|| env("OSAC_URL"));
    conn.token = conn.token.take().or_else(|| env("OSAC_TOKEN"));
    conn.config = conn
        .config
        .take()
        .or_else(|| env("OSAC_CONFIG").map(PathBuf::from));
    conn.ca_file = conn
        .ca_file
        .take()
        .or_else(|| env("OSAC_CA_FILE").map(PathBuf::from));
}

/// The candidates for `target`: `prefix` + each name starting with `partial`, sorted; empty on
/// any failure.
pub async fn candidates(target: &Target) -> Vec<String> {
    let listed = tokio::time::timeout(TIMEOUT, async {
        let ep = target.conn.endpoint().ok()?;
        let api = osac_client::Api::with_tls(&ep.url, &ep.token, &ep.tls).ok()?;
        api.list(
            target.scope,
            target.kind.collection(),
            &ListQuery::default(),
        )
        .await
        .ok()
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_default();
    let mut names: Vec<String> = listed
        .iter()
        .filter_map(|o| o.pointer("/metadata/name").and_then(|n| n.as_str()))
        .filter(|n| !n.is_empty() && n.starts_with(&target.partial))
        .map(|n| format!("{}{n}", target.prefix))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The completion candidates of a command line, one a line (empty when none or on failure).
pub async fn run(cmd: &clap::Command, words: &[String]) -> String {
    match target(cmd, words) {
        Some(t) => candidates(&t).await.into_iter().map(|c| c + "\n").collect(),
        None => String::new(),
    }
}

/// What follows clap's script for `shell`: the hook that asks `osac __complete` for names.
/// Shells without a hook get clap's script alone.
pub fn hook(shell: clap_complete::Shell) -> &'static str {
    match shell {
        clap_complete::Shell::Bash => BASH,
        clap_complete::Shell::Zsh => ZSH,
        clap_complete::Shell::Fish => FISH,
        _ => "",
    }
}

const BASH: &str = r#"
# Object names, asked of the server (`osac __complete`); clap's completion otherwise.
_osac_names() {
    local cur="${COMP_WORDS[COMP_CWORD]}" names
    names="$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:0:COMP_CWORD+1}" 2>/dev/null)"
    if [[ -n "$names" ]]; then
        local IFS=$'\n'
        COMPREPLY=($(compgen -W "$names" -- "$cur"))
        compopt +o default 2>/dev/null
        return 0
    fi
    _osac "$@"
}
if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _osac_names -o nosort -o bashdefault -o default osac
else
    complete -F _osac_names -o bashdefault -o default osac
fi
"#;

const ZSH: &str = r#"
# Object names, asked of the server (`osac __complete`); clap's completion otherwise.
_osac_names() {
    local -a names
    names=("${(@f)$(${words[1]} __complete "${(@)words[1,CURRENT]}" 2>/dev/null)}")
    if [[ -n "${names[1]}" ]]; then
        compadd -Q -- "${names[@]}"
        return 0
    fi
    _osac "$@"
}
compdef _osac_names osac
"#;

const FISH: &str = r#"
# Object names, asked of the server (`osac __complete`); clap's completion otherwise.
complete -c osac -a '(osac __complete (commandline -opc) (commandline -ct) 2>/dev/null)'
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: crate::client::ClientCommand,
    }

    fn at(line: &str) -> Option<(Kind, Scope, String, String)> {
        let mut words: Vec<String> = std::iter::once("osac")
            .chain(line.split(' '))
            .map(str::to_string)
            .collect();
        if line.ends_with(' ') {
            words.pop();
            words.push(String::new());
        }
        target(&Cli::command(), &words).map(|t| (t.kind, t.scope, t.prefix, t.partial))
    }

    #[test]
    fn names_are_completed_after_a_kind() {
        let tenant = |k, prefix: &str, partial: &str| {
            Some((k, Scope::Tenant, prefix.to_string(), partial.to_string()))
        };
        assert_eq!(at("get subnet "), tenant(Kind::Subnet, "", ""));
        assert_eq!(at("get subnets we"), tenant(Kind::Subnet, "", "we"));
        assert_eq!(at("delete sg a b"), tenant(Kind::SecurityGroup, "", "b"));
        assert_eq!(
            at("delete securitygroup/"),
            tenant(Kind::SecurityGroup, "securitygroup/", "")
        );
        assert_eq!(
            at("delete sg/x sg/w"),
            tenant(Kind::SecurityGroup, "sg/", "w")
        );
        assert_eq!(
            at("get -o json --url http://h:1 vn n"),
            tenant(Kind::VirtualNetwork, "", "n")
        );
        assert_eq!(at("describe vm "), tenant(Kind::ComputeInstance, "", ""));
        assert_eq!(
            at("admin get pool p"),
            Some((
                Kind::ExternalIpPool,
                Scope::Provider,
                String::new(),
                "p".into()
            ))
        );
        assert_eq!(
            at("delete tenant "),
            Some((Kind::Tenant, Scope::Provider, String::new(), String::new()))
        );
    }

    #[test]
    fn other_words_are_left_to_clap() {
        for line in [
            "get ",           // a kind
            "get sub",        // a kind
            "create subnet ", // create takes no names
            "get subnet --filter ",
            "get subnet -",
            "describe subnet a ", // one name only
            "label subnet a ",    // the changes
            "get widget ",        // unknown kind
            "delete widget/x",
            "events --for ",
            "",
        ] {
            assert_eq!(at(line), None, "{line:?}");
        }
    }

    #[test]
    fn connection_flags_are_read_from_the_line() {
        let words: Vec<String> = [
            "osac",
            "get",
            "--url",
            "http://h:9",
            "--token=t",
            "subnet",
            "",
        ]
        .map(String::from)
        .to_vec();
        let t = target(&Cli::command(), &words).expect("a name");
        assert_eq!(t.conn.url.as_deref(), Some("http://h:9"));
        assert_eq!(t.conn.token.as_deref(), Some("t"));
    }

    #[test]
    fn hooks_call_the_hidden_command() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            assert!(hook(shell).contains("__complete"), "{shell}");
        }
    }
}
