//! `osac-dataplane-bench`: the scale benchmark of the `linux` dataplane, run as root with
//! one command (`cargo run --release -p osac-dataplane-bench`). It drives the
//! `linux` fabric and k8s managers directly (no server, no store) on the local kernel and prints
//! one line per measure with its goal, PASS/MISS and the ratio:
//!
//! 1. time to program the 1st vs the 5,000th ExternalIPAttachment and security group in one VN;
//! 2. first-packet (TCP connect) latency through the DNAT with 5,000 mappings: our nft map vs
//!    the same mappings as a linear iptables-nft chain (Neutron's approach);
//! 3. time to rebuild the whole dataplane of 500 workloads after a restart.
//!
//! Everything it creates is named from ids tagged with its process id, uses its own transit
//! ranges, state directories and pools, and is removed at the end. See `docs/benchmarks.md`.

mod latency;
mod rebuild;
mod scale;
mod stats;
mod world;

use std::fmt::Write as _;
use std::process::ExitCode;

use stats::{first_last, ms, percentile, summary_ms, summary_us, thousands, us};

const USAGE: &str =
    "usage: osac-dataplane-bench [--attachments 5000] [--groups 5000] [--samples 2000]
                            [--vns 10] [--subnets 5] [--ports 10] [--skip-scale] [--skip-rebuild]
Runs as root; needs ip, nft, dnsmasq, sysctl, conntrack and (measure 2) iptables-restore.";

/// Command-line options.
struct Args {
    attachments: usize,
    groups: usize,
    samples: usize,
    shape: rebuild::Shape,
    skip_scale: bool,
    skip_rebuild: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        attachments: 5000,
        groups: 5000,
        samples: 2000,
        shape: rebuild::Shape {
            vns: 10,
            subnets: 5,
            ports: 10,
        },
        skip_scale: false,
        skip_rebuild: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut num = || -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .filter(|v: &usize| *v > 0)
                .ok_or_else(|| format!("{flag} needs a positive number\n{USAGE}"))
        };
        match flag.as_str() {
            "--attachments" => a.attachments = num()?,
            "--groups" => a.groups = num()?,
            "--samples" => a.samples = num()?,
            "--vns" => a.shape.vns = num()?,
            "--subnets" => a.shape.subnets = num()?,
            "--ports" => a.shape.ports = num()?,
            "--skip-scale" => a.skip_scale = true,
            "--skip-rebuild" => a.skip_rebuild = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    if a.attachments > 30_000 {
        return Err("--attachments is at most 30000 (two /17 pools)".into());
    }
    Ok(a)
}

/// One report line.
struct Line {
    id: &'static str,
    what: String,
    measured: String,
    goal: String,
    verdict: &'static str,
    note: String,
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn tool_version(program: &str, args: &[&str]) -> String {
    osac_linux::cmd::run(program, args, None)
        .await
        .map(|s| s.lines().next().unwrap_or("").trim().to_string())
        .unwrap_or_else(|_| "not installed".into())
}

fn render(header: &[(String, String)], lines: &[Line], details: &[String]) -> String {
    let mut out = String::from("== osac-dataplane-bench report ==\n");
    for (k, v) in header {
        let _ = writeln!(out, "{k:<9} {v}");
    }
    out.push('\n');
    let w =
        |f: &dyn Fn(&Line) -> usize, min: usize| lines.iter().map(f).max().unwrap_or(0).max(min);
    let (ww, wm, wg) = (
        w(&|l| l.what.chars().count(), 7),
        w(&|l| l.measured.chars().count(), 8),
        w(&|l| l.goal.chars().count(), 4),
    );
    let pad = |s: &str, n: usize| format!("{s}{}", " ".repeat(n.saturating_sub(s.chars().count())));
    let _ = writeln!(
        out,
        "#  {}  {}  {}  result",
        pad("measure", ww),
        pad("measured", wm),
        pad("goal", wg)
    );
    for l in lines {
        let _ = writeln!(
            out,
            "{:<2} {}  {}{}  {}  {:<6}{}",
            l.id,
            pad(&l.what, ww),
            " ".repeat(wm.saturating_sub(l.measured.chars().count())),
            l.measured,
            pad(&l.goal, wg),
            l.verdict,
            l.note
        );
    }
    let goals: Vec<&Line> = lines.iter().filter(|l| l.verdict != "-").collect();
    let _ = writeln!(
        out,
        "\ngoals met: {} of {}\n\ndetails:",
        goals.iter().filter(|l| l.verdict == "PASS").count(),
        goals.len()
    );
    for d in details {
        let _ = writeln!(out, "  {d}");
    }
    out
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = osac_linux::preflight().await {
        eprintln!("osac-dataplane-bench: {e}");
        return ExitCode::from(2);
    }
    let mut header = vec![
        (
            "machine".to_string(),
            format!(
                "{} CPUs visible, kernel {}; managers called in-process (release build), one kernel writer",
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(0),
                std::fs::read_to_string("/proc/sys/kernel/osrelease")
                    .unwrap_or_default()
                    .trim()
            ),
        ),
        (
            "tools".to_string(),
            format!(
                "{}; {}",
                tool_version("nft", &["--version"]).await,
                tool_version("iptables", &["-V"]).await
            ),
        ),
    ];
    let load_start = loadavg();
    let mut lines = Vec::new();
    let mut details = Vec::new();
    let mut failed = false;

    if !args.skip_scale {
        eprintln!(
            "measures 1–2: {} attachments, {} security groups, {} latency samples …",
            args.attachments, args.groups, args.samples
        );
        match scale::run(args.attachments, args.groups, args.samples).await {
            Ok(r) => scale_lines(&args, &r, &mut lines, &mut details),
            Err(e) => {
                failed = true;
                details.push(format!("[1–2] failed: {e}"));
            }
        }
    }
    if !args.skip_rebuild {
        let s = args.shape;
        eprintln!(
            "measure 3: {} VNs × {} subnets × {} ports, build, wipe, rebuild …",
            s.vns, s.subnets, s.ports
        );
        match rebuild::run(s).await {
            Ok(r) => rebuild_lines(&r, &mut lines, &mut details),
            Err(e) => {
                failed = true;
                details.push(format!("[3] failed: {e}"));
            }
        }
    }
    header.push((
        "load".to_string(),
        format!(
            "1/5/15-min load average {load_start} at the start, {} at the end (other work on the machine skews the figures)",
            loadavg()
        ),
    ));
    print!("{}", render(&header, &lines, &details));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn scale_lines(
    args: &Args,
    r: &scale::ScaleResult,
    lines: &mut Vec<Line>,
    details: &mut Vec<String>,
) {
    let n = thousands(args.attachments);
    let (a1, an, ratio) = first_last(&r.attach, 10);
    lines.push(Line {
        id: "1",
        what: format!("ExternalIPAttachment: 1st vs {n}th (mean of 10)"),
        measured: format!("{:.1} → {:.1} ms = {ratio:.2}×", ms(a1), ms(an)),
        goal: "≤ 2×".into(),
        verdict: verdict(ratio <= 2.0),
        note: format!("{:.2}× goal", ratio / 2.0),
    });
    let g = thousands(args.groups);
    let (g1, gn, gratio) = first_last(&r.groups, 10);
    lines.push(Line {
        id: "",
        what: format!("security group: 1st vs {g}th (mean of 10)"),
        measured: format!("{:.1} → {:.1} ms = {gratio:.2}×", ms(g1), ms(gn)),
        goal: "≤ 2×".into(),
        verdict: verdict(gratio <= 2.0),
        note: format!("{:.2}× goal", gratio / 2.0),
    });
    let (s, l) = (stats::mean(&r.reapply_small), stats::mean(&r.reapply_large));
    let rr = l.as_secs_f64() / s.as_secs_f64();
    lines.push(Line {
        id: "",
        what: format!("security group rule update at 10 vs {g} groups"),
        measured: format!("{:.1} → {:.1} ms = {rr:.2}×", ms(s), ms(l)),
        goal: "≤ 2×".into(),
        verdict: verdict(rr <= 2.0),
        note: format!("{:.2}× goal", rr / 2.0),
    });
    details.push(format!(
        "[1] ExternalIPAttachment programming: {}",
        summary_ms(&r.attach)
    ));
    details.push(format!(
        "[1] security group (new group) programming: {}",
        summary_ms(&r.groups)
    ));
    details.push(format!(
        "[1] re-apply of the first group (rule added/removed): with 10 groups {}; with {g} groups {}",
        summary_ms(&r.reapply_small),
        summary_ms(&r.reapply_large)
    ));
    details.extend(r.details.iter().cloned());
    match &r.latency {
        Ok(lat) => {
            let (o, i) = (
                percentile(&lat.ours_n, 50.0),
                percentile(&lat.linear_n, 50.0),
            );
            let (o99, i99) = (
                percentile(&lat.ours_n, 99.0),
                percentile(&lat.linear_n, 99.0),
            );
            let ratio = i.as_secs_f64() / o.as_secs_f64();
            lines.push(Line {
                id: "2",
                what: format!(
                    "DNAT first packet at {n} mappings, p50: nft map vs iptables-nft chain"
                ),
                measured: format!("{:.0} vs {:.0} µs = {ratio:.2}×", us(o), us(i)),
                goal: "(reference)".into(),
                verdict: "-",
                note: format!(
                    "linear chain {ratio:.2}× slower at p50, {:.2}× at p99 ({:.0} vs {:.0} µs)",
                    i99.as_secs_f64() / o99.as_secs_f64(),
                    us(o99),
                    us(i99)
                ),
            });
            details.push(format!(
                "[2] ours, 1 mapping:       {}",
                summary_us(&lat.ours_one)
            ));
            details.push(format!(
                "[2] ours, {n} mappings:   {}",
                summary_us(&lat.ours_n)
            ));
            details.push(format!(
                "[2] iptables-nft, {n} rules: {}",
                summary_us(&lat.linear_n)
            ));
            details.push(format!(
                "[2] connect() = SYN → SYN/ACK from osac-ext to <external>:5201 through the VN router (DNAT) to a listener in the target's namespace; new connection per sample, samples of both variants interleaved; the linear chain costs {:.1} µs more per new flow at p50",
                us(i) - us(o)
            ));
        }
        Err(why) => lines.push(Line {
            id: "2",
            what: "DNAT first packet: nft map vs iptables-nft chain".into(),
            measured: "not measured".into(),
            goal: "(reference)".into(),
            verdict: "-",
            note: why.clone(),
        }),
    }
}

fn rebuild_lines(r: &rebuild::RebuildResult, lines: &mut Vec<Line>, details: &mut Vec<String>) {
    let secs = r.rebuild.as_secs_f64();
    lines.push(Line {
        id: "3",
        what: format!(
            "rebuild {} workloads after a restart",
            thousands(r.workloads)
        ),
        measured: format!("{secs:.1} s"),
        goal: "≤ 60 s".into(),
        verdict: verdict(secs <= 60.0 && r.differing.is_empty()),
        note: format!(
            "{:.2}× goal; {}",
            secs / 60.0,
            if r.differing.is_empty() {
                format!(
                    "kernel state identical to before in all {} namespaces",
                    r.compared
                )
            } else {
                format!("{} of {} namespaces differ", r.differing.len(), r.compared)
            }
        ),
    });
    details.push(format!(
        "[3] initial build from nothing: {:.1} s; wipe removed {} namespaces; the kernel finished destroying them {:.1} s later (rtnl probe back to ~{:.0} ms; untimed, a reboot has no such teardown); {} operations replayed; dnsmasq running for {}/{} subnets after the rebuild",
        r.initial.as_secs_f64(),
        r.wiped,
        r.settle.as_secs_f64(),
        ms(r.baseline),
        r.operations,
        r.dnsmasq.0,
        r.dnsmasq.1
    ));
    for (name, d) in &r.stages {
        details.push(format!("[3]   {:>7.2} s  {name}", d.as_secs_f64()));
    }
    for ns in r.differing.iter().take(5) {
        details.push(format!("[3] differs after the rebuild: {ns}"));
    }
}
