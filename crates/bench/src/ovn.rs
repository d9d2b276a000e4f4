//! `osac-bench --ovn`: the `ovn` fabric driver at scale, against a bare northbound
//! `ovsdb-server` started here (no OVN daemons, no root: what is timed is the northbound
//! commit, not flow installation).
//!
//! One VirtualNetwork, one /18 subnet and one security group, then `--ovn-ports` network
//! attachments one after the other (each in the security group): the latency of the 1st and of
//! the last, the p50 of the last 10 %, and the northbound transactions each costs. At that size:
//! security group changes, ExternalIPAttachments, and after a restart (a new driver on the same
//! database) a full resync with nothing to change and one with an ACL removed by hand.
//! With `--ovn-full-reads` the same run is repeated with every operation reading every row of
//! ours (how the driver read before its reads were keyed), to compare.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use osac_backends::types::*;
use osac_backends::{Capability, DriverConfig, FabricManager, OpError, Registration, Role};
use osac_ovn::driver::ProviderSettings;
use osac_ovn::nb::{self, Reads};
use osac_ovn::sandbox::{self, NB_SCHEMA};
use osac_ovn::{OvnFabric, OvnSettings};
use osac_ovsdb::{Client, datum, op};
use serde_json::Value;

use crate::report::{Goal, Line, Report};

/// What to run.
pub struct Settings {
    /// Network attachments created.
    pub ports: usize,
    /// Also run with every operation reading every row of ours.
    pub full_reads: bool,
}

/// Goal: attachment p50 at the full port count.
const ATTACH_P50_GOAL_MS: f64 = 5.0;
/// Goal: a full resync of everything after a restart.
const RESYNC_GOAL_S: f64 = 10.0;
/// Timed repetitions of the security group change and of the ExternalIPAttachment.
const REPEATS: usize = 20;

/// One run's numbers.
struct Measured {
    ports: usize,
    first_ms: f64,
    last_ms: f64,
    tail_p50_ms: f64,
    attach_txns: f64,
    sg_p50_ms: f64,
    sg_txns: f64,
    eip_p50_ms: f64,
    eip_txns: f64,
    restart_s: f64,
    resync_clean_s: f64,
    resync_clean_txns: u64,
    resync_repair_s: f64,
    repaired: usize,
    /// The database file's size after the attachments (its log of every transaction).
    db_mib: f64,
}

fn registration() -> Registration {
    Registration {
        name: "ovn-bench".into(),
        role: Role::Fabric,
        description: "osac-bench --ovn".into(),
        capabilities: BTreeSet::from([Capability::Ipv4]),
        driver: DriverConfig::Ovn(serde_yaml_ng::Value::Null),
        hosting_clusters: Vec::new(),
    }
}

fn settings(dir: &Path) -> Result<OvnSettings> {
    Ok(OvnSettings {
        northbound: format!("unix:{}", dir.join("nb.sock").display()),
        provider: ProviderSettings {
            provider_network: "osac-provider".into(),
            transit_cidr: "100.64.0.0/16".parse()?,
            provider_gateway: "100.64.0.1".parse()?,
            transit_ipv6_cidr: None,
            provider_ipv6_gateway: None,
        },
        gateway_chassis: vec!["hv0".into()],
        resync_seconds: 0,
        private_key: None,
        certificate: None,
        ca_certificate: None,
        chassis: Default::default(),
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The `q` quantile of `values` (sorted here).
fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let i = ((values.len() as f64 - 1.0) * q).round() as usize;
    values[i.min(values.len() - 1)]
}

/// The driver's northbound transactions across `work`, and how long it took.
async fn counted<T>(
    fabric: &OvnFabric,
    work: impl Future<Output = Result<T, OpError>>,
) -> Result<(T, Duration, u64)> {
    let before = fabric.northbound_transactions().await;
    let t = Instant::now();
    let out = work.await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let took = t.elapsed();
    Ok((out, took, fabric.northbound_transactions().await - before))
}

/// Removes one ACL of ours by hand (out of its port group), as an operator would.
async fn remove_one_acl(dir: &Path) -> Result<()> {
    let address = osac_ovsdb::Address::Unix(dir.join("nb.sock"));
    let (client, _) = Client::connect(&address).await?;
    let groups = client
        .transact(
            nb::DATABASE,
            vec![op::select(
                "Port_Group",
                vec![op::map_has("external_ids", nb::MANAGED_KEY, "true")],
                Some(&["_uuid", "acls"]),
            )],
        )
        .await?;
    let rows = groups[0]["rows"].as_array().cloned().unwrap_or_default();
    let (group, acl) = rows
        .iter()
        .find_map(|r: &Value| {
            let acl = datum::uuid_set_items(&r["acls"]).into_iter().next()?;
            Some((datum::as_uuid(&r["_uuid"])?.to_string(), acl))
        })
        .context("no port group of ours holds an ACL")?;
    client
        .transact(
            nb::DATABASE,
            vec![op::mutate(
                "Port_Group",
                op::by_uuid(&group),
                vec![op::mutation(
                    "acls",
                    "delete",
                    datum::set([datum::uuid(&acl)]),
                )],
            )],
        )
        .await?;
    Ok(())
}

async fn measure(s: &Settings, reads: Reads) -> Result<Measured> {
    let tmp = tempfile::Builder::new()
        .prefix("osac-bench-ovn-")
        .tempdir()?;
    let dir = tmp.path();
    sandbox::serve_database(dir, "nb", NB_SCHEMA)
        .await
        .context("starting ovsdb-server")?;
    let result = measure_on(s, reads, dir).await;
    sandbox::stop_database(dir, "nb").await;
    result
}

async fn measure_on(s: &Settings, reads: Reads, dir: &Path) -> Result<Measured> {
    let fabric = OvnFabric::open(registration(), settings(dir)?).await?;
    fabric.set_reads(reads).await;
    let (vn, subnet, sg) = ("vn-1", "subnet-1", "sg-1");
    let op_err = |e: OpError| anyhow::anyhow!("{e}");
    fabric
        .create_virtual_network(&CreateVirtualNetworkRequest {
            virtual_network_id: vn.into(),
            tenant: "bench".into(),
            ipv4_cidr: Some("10.0.0.0/16".parse()?),
            ipv6_cidr: None,
        })
        .await
        .map_err(op_err)?;
    fabric
        .create_subnet(&CreateSubnetRequest {
            subnet_id: subnet.into(),
            virtual_network_id: vn.into(),
            ipv4_cidr: Some("10.0.0.0/18".parse()?),
            ipv6_cidr: None,
            vip_cidr: None,
        })
        .await
        .map_err(op_err)?;
    let anywhere = "0.0.0.0/0".parse()?;
    let rule = |port: u16| SecurityRule {
        protocol: Protocol::Tcp,
        port_from: Some(port),
        port_to: Some(port),
        cidr: anywhere,
    };
    let group = |ports: &[u16]| ApplySecurityGroupRequest {
        security_group_id: sg.into(),
        virtual_network_id: vn.into(),
        ingress: ports.iter().copied().map(rule).collect(),
        egress: vec![rule(443)],
    };
    fabric
        .apply_security_group(&group(&[22]))
        .await
        .map_err(op_err)?;

    let mut latencies = Vec::with_capacity(s.ports);
    let mut txns = 0;
    let mut addresses: Vec<IpAddr> = Vec::new();
    for i in 0..s.ports {
        let req = CreateNetworkAttachmentRequest {
            attachment_id: format!("port-{i}"),
            host: format!("hv{}", i % 16),
            interface: format!("data-{i}"),
            mac_address: format!(
                "02:00:00:{:02x}:{:02x}:{:02x}",
                i >> 16,
                (i >> 8) & 0xff,
                i & 0xff
            ),
            subnet_id: subnet.into(),
            virtual_network_id: vn.into(),
            security_groups: vec![sg.into()],
            primary: true,
            allowed_addresses: Vec::new(),
        };
        let (lease, took, n) = counted(&fabric, fabric.create_network_attachment(&req)).await?;
        latencies.push(ms(took));
        txns += n;
        if addresses.len() < REPEATS {
            addresses.extend(lease.ipv4_address);
        }
        if (i + 1) % 1000 == 0 {
            eprintln!("[osac-bench] ovn ({reads:?} reads): {} ports", i + 1);
        }
    }
    let db_mib = std::fs::metadata(dir.join("nb.db")).map_or(f64::NAN, |m| m.len() as f64)
        / f64::from(1 << 20);
    let first_ms = latencies.first().copied().unwrap_or(f64::NAN);
    let last_ms = latencies.last().copied().unwrap_or(f64::NAN);
    let tail = s.ports.div_ceil(10);
    let tail_p50_ms = quantile(&mut latencies[s.ports - tail..], 0.5);

    let (mut sg_ms, mut sg_txns) = (Vec::new(), 0);
    for i in 0..REPEATS {
        let ports: Vec<u16> = if i % 2 == 0 { vec![22, 80] } else { vec![22] };
        let (_, took, n) = counted(&fabric, fabric.apply_security_group(&group(&ports))).await?;
        sg_ms.push(ms(took));
        sg_txns += n;
    }

    let (mut eip_ms, mut eip_txns) = (Vec::new(), 0);
    for (i, target) in addresses.iter().enumerate() {
        let external = fabric
            .allocate_external_ip(&AllocateExternalIpRequest {
                external_ip_id: format!("eip-{i}"),
                pool_id: "pool-1".into(),
                cidrs: vec!["203.0.113.0/24".parse()?],
            })
            .await
            .map_err(op_err)?;
        let req = CreateExternalIpAttachmentRequest {
            attachment_id: format!("eipa-{i}"),
            virtual_network_id: vn.into(),
            external_address: external.address,
            target_ip: *target,
        };
        let (_, took, n) = counted(&fabric, fabric.create_external_ip_attachment(&req)).await?;
        eip_ms.push(ms(took));
        eip_txns += n;
    }
    drop(fabric);

    // A restart: a new driver on the same database loads its records from it.
    let t = Instant::now();
    let fabric = OvnFabric::open(registration(), settings(dir)?).await?;
    let restart_s = t.elapsed().as_secs_f64();
    let (clean, took, resync_clean_txns) = counted(&fabric, fabric.resync()).await?;
    if !clean.is_empty() {
        bail!("a resync right after a restart changed rows: {clean:?}");
    }
    let resync_clean_s = took.as_secs_f64();
    remove_one_acl(dir).await?;
    let (repair, took, _) = counted(&fabric, fabric.resync()).await?;
    if repair.is_empty() {
        bail!("the resync did not put back the ACL removed by hand");
    }
    let repaired = repair.inserted.len() + repair.updated.len() + repair.deleted.len();
    let attempts = |n: usize| n.max(1) as f64;
    Ok(Measured {
        ports: s.ports,
        first_ms,
        last_ms,
        tail_p50_ms,
        attach_txns: txns as f64 / attempts(s.ports),
        sg_p50_ms: quantile(&mut sg_ms, 0.5),
        sg_txns: sg_txns as f64 / attempts(REPEATS),
        eip_p50_ms: quantile(&mut eip_ms, 0.5),
        eip_txns: eip_txns as f64 / attempts(addresses.len()),
        restart_s,
        resync_clean_s,
        resync_clean_txns,
        resync_repair_s: took.as_secs_f64(),
        repaired,
        db_mib,
    })
}

fn line(id: &str, what: String, shown: String, value: f64, goal: Goal, goal_text: &str) -> Line {
    Line {
        id: id.into(),
        what,
        shown,
        value,
        goal,
        goal_text: goal_text.into(),
        note: String::new(),
    }
}

fn push(report: &mut Report, m: &Measured, label: &str, goals: bool) {
    let (attach_goal, resync_goal, attach_text, resync_text) = if goals {
        (
            Goal::AtMost(ATTACH_P50_GOAL_MS),
            Goal::AtMost(RESYNC_GOAL_S),
            "≤ 5 ms",
            "≤ 10 s",
        )
    } else {
        (Goal::None, Goal::None, "-", "-")
    };
    let id = |n: &str| if goals { n.to_string() } else { String::new() };
    report.lines.push(line(
        &id("O1"),
        format!(
            "{label}: port attachment p50 at {} ports (last 10 %)",
            m.ports
        ),
        format!("{:.2} ms", m.tail_p50_ms),
        m.tail_p50_ms,
        attach_goal,
        attach_text,
    ));
    report.lines.push(line(
        "",
        format!(
            "  {label}: 1st / {}th attachment, transactions each, database file",
            m.ports
        ),
        format!(
            "{:.2} / {:.2} ms, {:.1}, {:.0} MiB",
            m.first_ms, m.last_ms, m.attach_txns, m.db_mib
        ),
        f64::NAN,
        Goal::None,
        "-",
    ));
    report.lines.push(line(
        "",
        format!("  {label}: security group change p50, transactions each"),
        format!("{:.2} ms, {:.1}", m.sg_p50_ms, m.sg_txns),
        f64::NAN,
        Goal::None,
        "-",
    ));
    report.lines.push(line(
        "",
        format!("  {label}: ExternalIPAttachment p50, transactions each"),
        format!("{:.2} ms, {:.1}", m.eip_p50_ms, m.eip_txns),
        f64::NAN,
        Goal::None,
        "-",
    ));
    report.lines.push(line(
        &id("O2"),
        format!("{label}: full resync after a restart, nothing to change"),
        format!(
            "{:.2} s ({} transactions; restart {:.2} s)",
            m.resync_clean_s, m.resync_clean_txns, m.restart_s
        ),
        m.resync_clean_s,
        resync_goal,
        resync_text,
    ));
    report.lines.push(line(
        &id("O3"),
        format!("{label}: full resync with one ACL removed by hand"),
        format!("{:.2} s ({} rows put back)", m.resync_repair_s, m.repaired),
        m.resync_repair_s,
        resync_goal,
        resync_text,
    ));
}

/// Runs the measure (skipped, with the reason, when the OVN tools are missing).
pub async fn run(s: &Settings, report: &mut Report) -> Result<()> {
    if let Some(missing) = sandbox::missing_tools() {
        report
            .warnings
            .push(format!("--ovn skipped: missing {missing}"));
        return Ok(());
    }
    if s.ports == 0 {
        bail!("--ovn-ports must be at least 1");
    }
    report.header.push((
        "ovn".into(),
        format!(
            "{} network attachments, one subnet, one security group, a bare northbound ovsdb-server ({})",
            s.ports,
            if s.full_reads {
                "keyed reads, then full reads"
            } else {
                "keyed reads"
            }
        ),
    ));
    let keyed = measure(s, Reads::Touched)
        .await
        .context("ovn, keyed reads")?;
    push(report, &keyed, "ovn", true);
    if s.full_reads {
        let full = measure(s, Reads::Everything)
            .await
            .context("ovn, full reads")?;
        push(report, &full, "ovn, full reads", false);
        report.lines.push(Line {
            id: String::new(),
            what: "  attachment p50: full reads / keyed reads".into(),
            shown: format!("{:.1}×", full.tail_p50_ms / keyed.tail_p50_ms),
            value: f64::NAN,
            goal: Goal::None,
            goal_text: "-".into(),
            note: String::new(),
        });
    }
    Ok(())
}
