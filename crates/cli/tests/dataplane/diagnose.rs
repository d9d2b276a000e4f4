//! What a must-work probe prints when a path does not answer in time: the fabric state a reader
//! needs to tell a flooding problem (no neighbour entry, a VTEP missing from the underlay's group)
//! from a filtering one (neighbour known, packets dropped).

use std::fmt::Write as _;
use std::net::IpAddr;
use std::process::Command;

use osac_linux::names::{EXT_NS, UNDERLAY_BRIDGE};

/// How much of one command's output the report keeps.
const LIMIT: usize = 6000;

fn run(report: &mut String, args: &[&str]) {
    run_keeping(report, args, |_| true);
}

/// Runs `args` and keeps the lines `keep` accepts.
fn run_keeping(report: &mut String, args: &[&str], keep: fn(&str) -> bool) {
    let _ = writeln!(report, "$ {}", args.join(" "));
    let out = match Command::new(args[0]).args(&args[1..]).output() {
        Ok(out) => out,
        Err(e) => {
            let _ = writeln!(report, "  (not run: {e})");
            return;
        }
    };
    let mut text: String = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| keep(l))
        .map(|l| format!("{}\n", vxlan_summary(l)))
        .collect();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    if text.len() > LIMIT {
        let cut = (0..=LIMIT)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str("\n  … (cut)");
    }
    for l in text.lines() {
        let _ = writeln!(report, "  {l}");
    }
}

/// A VXLAN device's line of `ip -d -o link` cut to its name, id, group and local address.
fn vxlan_summary(line: &str) -> String {
    match (line.find(": "), line.find("vxlan id"), line.find(" dev ")) {
        (Some(name), Some(id), Some(dev)) if name < id && id < dev => {
            let name = line[name + 2..].split(':').next().unwrap_or("");
            format!("{name} {}", &line[id..dev])
        }
        _ => line.to_string(),
    }
}

/// The infrastructure namespaces (routers, hosting clusters, switches): every `osac-*`
/// namespace that holds a VXLAN device.
fn vtep_namespaces() -> Vec<String> {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|ns| ns.starts_with("osac-"))
        .filter(|ns| {
            Command::new("ip")
                .args(["-n", ns, "-o", "link", "show", "type", "vxlan"])
                .output()
                .is_ok_and(|o| !o.stdout.is_empty())
        })
        .map(str::to_string)
        .collect()
}

/// The state around a probe from namespace `from` to `to` that did not get through.
pub fn fabric_report(from: &str, to: IpAddr) -> String {
    let mut r = format!("=== fabric state: {from} -> {to} failed ===\n");
    run(&mut r, &["ip", "-n", from, "-br", "addr"]);
    run(&mut r, &["ip", "-n", from, "neigh"]);
    run(&mut r, &["ip", "-n", from, "route", "get", &to.to_string()]);
    run(
        &mut r,
        &["ip", "-n", EXT_NS, "-d", "link", "show", UNDERLAY_BRIDGE],
    );
    run(
        &mut r,
        &["ip", "-n", EXT_NS, "-br", "addr", "show", UNDERLAY_BRIDGE],
    );
    run(&mut r, &["bridge", "-n", EXT_NS, "mdb", "show"]);
    for ns in vtep_namespaces() {
        // Where each segment floods (the group) and where it learned each MAC (the fdb).
        run_keeping(
            &mut r,
            &["ip", "-n", &ns, "-d", "-o", "link", "show", "type", "vxlan"],
            |l| l.contains("vxlan id"),
        );
        run(&mut r, &["ip", "-n", &ns, "neigh"]);
        // The VXLAN devices' own entries: where each segment's unicast and floods go.
        run_keeping(&mut r, &["bridge", "-n", &ns, "fdb", "show"], |l| {
            l.contains(" dst ")
        });
    }
    r
}
