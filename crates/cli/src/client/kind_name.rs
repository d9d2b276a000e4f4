//! `KIND/NAME` wherever a kind and a name are taken (`osac get subnet/my-subnet`,
//! `osac delete sg/x sg/y`), as kubectl writes them, and the kind's value parser, which offers
//! the kinds to shell completion and to `--help`.

use std::ffi::OsString;

use clap::builder::{PossibleValue, TypedValueParser};

use super::kind::{self, CLI_KINDS, Kind};

/// The commands whose first positional is a kind followed by names.
const KIND_COMMANDS: [&str; 5] = ["get", "describe", "delete", "label", "update"];

/// `argv` with `KIND/NAME` arguments of the kind-taking commands split: the first positional
/// `KIND/NAME` becomes `KIND NAME`; a later `KIND/NAME` of the same kind becomes `NAME`.
/// Anything else (options and their values, other commands) is left as it is, for clap to
/// judge. `cmd` is the whole command line's definition (to tell options that take a value).
pub fn expand(cmd: &clap::Command, argv: Vec<OsString>) -> Vec<OsString> {
    let mut cmd = cmd.clone();
    cmd.build();
    let mut out = Vec::with_capacity(argv.len() + 1);
    let mut args = argv.into_iter();
    if let Some(program) = args.next() {
        out.push(program);
    }
    let mut current = &cmd;
    let mut in_kind_command = false;
    let mut kind_seen: Option<Kind> = None;
    let mut takes_value_next = false;
    for arg in args {
        let Some(text) = arg.to_str().map(str::to_string) else {
            out.push(arg);
            continue;
        };
        if takes_value_next {
            takes_value_next = false;
            out.push(arg);
            continue;
        }
        if text.starts_with('-') {
            takes_value_next = !text.contains('=') && option_takes_value(current, &text);
            out.push(arg);
            continue;
        }
        if !in_kind_command {
            if let Some(sub) = current.find_subcommand(&text) {
                current = sub;
                in_kind_command = KIND_COMMANDS.contains(&sub.get_name());
            }
            out.push(arg);
            continue;
        }
        match (kind_seen, split(&text)) {
            (None, Some((k, name))) => {
                kind_seen = Some(k);
                out.push(OsString::from(&text[..text.len() - name.len() - 1]));
                out.push(OsString::from(name));
            }
            (None, None) => {
                kind_seen = kind::parse(&text).ok();
                out.push(arg);
            }
            (Some(seen), Some((k, name))) if k == seen => out.push(OsString::from(name)),
            _ => out.push(arg),
        }
    }
    out
}

/// `KIND/NAME` with a known kind and a non-empty name.
fn split(text: &str) -> Option<(Kind, &str)> {
    let (k, name) = text.split_once('/')?;
    let kind = kind::parse(k).ok()?;
    (!name.is_empty()).then_some((kind, name))
}

/// Whether the option `text` (`--long` or `-s`) of `cmd` takes a value.
fn option_takes_value(cmd: &clap::Command, text: &str) -> bool {
    let found = if let Some(long) = text.strip_prefix("--") {
        cmd.get_arguments().find(|a| a.get_long() == Some(long))
    } else {
        let short = text.chars().nth(1);
        if text.chars().count() != 2 {
            return false; // `-ojson`: the value is attached
        }
        cmd.get_arguments().find(|a| a.get_short() == short)
    };
    found.is_some_and(|a| a.get_action().takes_values())
}

/// The value parser of a kind argument: every spelling [`kind::parse`] accepts, with the
/// singular names (and the plurals and aliases, hidden) as possible values.
#[derive(Clone, Copy, Debug, Default)]
pub struct KindParser;

impl TypedValueParser for KindParser {
    type Value = Kind;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Kind, clap::Error> {
        let text = value.to_str().ok_or_else(|| {
            clap::Error::raw(clap::error::ErrorKind::InvalidUtf8, "kind is not UTF-8\n")
                .with_cmd(cmd)
        })?;
        kind::parse(text).map_err(|e| {
            clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{e}\n")).with_cmd(cmd)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(CLI_KINDS.into_iter().flat_map(|k| {
            let mut values = vec![PossibleValue::new(k.singular())];
            values.push(PossibleValue::new(k.plural()).hide(true));
            values.extend(
                k.aliases()
                    .iter()
                    .map(|a| PossibleValue::new(*a).hide(true)),
            );
            values
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cmd: &clap::Command, args: &[&str]) -> Vec<String> {
        let argv = std::iter::once("osac")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        expand(cmd, argv)
            .into_iter()
            .skip(1)
            .map(|a| a.to_string_lossy().to_string())
            .collect()
    }

    #[test]
    fn kind_slash_name_is_split_where_a_kind_is_taken() {
        use clap::{CommandFactory, Parser};
        #[derive(Parser)]
        struct Cli {
            #[command(subcommand)]
            command: crate::client::ClientCommand,
        }
        let cmd = Cli::command();
        assert_eq!(
            run(&cmd, &["get", "subnet/my-subnet"]),
            ["get", "subnet", "my-subnet"]
        );
        assert_eq!(
            run(&cmd, &["delete", "sg/x", "sg/y", "--wait"]),
            ["delete", "sg", "x", "y", "--wait"]
        );
        assert_eq!(
            run(&cmd, &["get", "-o", "json", "vn/a"]),
            ["get", "-o", "json", "vn", "a"]
        );
        assert_eq!(
            run(&cmd, &["admin", "get", "pool/p1"]),
            ["admin", "get", "pool", "p1"]
        );
        // An option's value, another kind, and other commands are left to clap.
        assert_eq!(
            run(&cmd, &["get", "--filter", "sg/x", "subnets"]),
            ["get", "--filter", "sg/x", "subnets"]
        );
        assert_eq!(
            run(&cmd, &["get", "subnet", "sg/x"]),
            ["get", "subnet", "sg/x"]
        );
        assert_eq!(
            run(&cmd, &["events", "--for", "subnet/web"]),
            ["events", "--for", "subnet/web"]
        );
        // The parsed command line holds the kind and the names.
        let parsed = Cli::try_parse_from(expand(
            &cmd,
            ["osac", "describe", "subnet/my-subnet"]
                .map(OsString::from)
                .to_vec(),
        ))
        .expect("parses");
        let crate::client::ClientCommand::Describe(d) = parsed.command else {
            panic!("not describe")
        };
        assert_eq!(d.opts.kind, Kind::Subnet);
        assert_eq!(d.opts.name, "my-subnet");
    }

    #[test]
    fn kinds_are_possible_values() {
        let names: Vec<String> = KindParser
            .possible_values()
            .expect("values")
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_string())
            .collect();
        assert!(names.contains(&"subnet".to_string()), "{names:?}");
        assert_eq!(names.len(), CLI_KINDS.len());
    }
}
