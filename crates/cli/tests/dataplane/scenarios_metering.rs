//! Bandwidth metering on the real dataplane: 10 MiB sent to a VM through its ExternalIP and
//! 10 MiB out through its NAT gateway are recorded exactly as the router's counters counted
//! them (IP packets, headers included), and that count less its TCP/IP headers is within 2 %
//! of what was sent; a server restart and a reset of the kernel's counters (what a rebuild
//! of the router's table does) between the two transfers lose nothing and double nothing; a
//! deleted path's counters go with it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use osac_linux::fabric_manager::render::meter::{self, MeterPath};
use osac_linux::names;
use osac_linux::probe::bulk;

use crate::harness::{Dp, EXT_GATEWAY, EXT_NS, blocking, items};
use crate::probes::{any, ping};

/// What each transfer sends.
const SENT: u64 = 10 * 1024 * 1024;

/// Ingress and egress recorded so far for `object_id`.
async fn recorded(dp: &Dp, object_id: &str) -> (i64, i64) {
    let now = chrono::Utc::now();
    let rows = dp
        .server()
        .await
        .store
        .traffic_usage(
            now - chrono::Duration::hours(1),
            now + chrono::Duration::hours(1),
            None,
        )
        .await
        .expect("traffic usage");
    rows.iter()
        .filter(|r| r.object_id == object_id)
        .fold((0, 0), |(i, e), r| {
            (i + r.ingress_bytes, e + r.egress_bytes)
        })
}

/// Waits (the sweep runs every second here) until `pick` of what is recorded for
/// `object_id` reaches `at_least`; answers the last totals.
async fn recorded_at_least(
    dp: &Dp,
    object_id: &str,
    pick: fn((i64, i64)) -> i64,
    at_least: i64,
) -> (i64, i64) {
    let mut last = (0, 0);
    for _ in 0..60 {
        last = recorded(dp, object_id).await;
        if pick(last) >= at_least {
            // One more sweep: whatever it adds must be nothing but stray packets.
            tokio::time::sleep(Duration::from_secs(2)).await;
            return recorded(dp, object_id).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    last
}

fn within_2_percent(got: i64, sent: u64) -> bool {
    let sent = sent as f64;
    ((got as f64) - sent).abs() <= sent * 0.02
}

/// Sends [`SENT`] bytes from `from` to `to`, received by a sink in `sink_ns`.
async fn transfer(sink_ns: &str, listen: SocketAddr, from: &str, to: SocketAddr) {
    let sink = bulk::Sink::start(sink_ns, listen).expect("sink");
    let from = from.to_string();
    blocking(move || bulk::send(&from, to, SENT))
        .await
        .expect("send");
    let got = blocking(move || sink.received()).await.expect("received");
    assert_eq!(got, SENT, "the sink received every byte");
}

/// (packets, bytes) of the counter `name` in the router's table, as the kernel holds it.
fn kernel_counter(ns: &str, table: &str, name: &str) -> (i64, i64) {
    let out = std::process::Command::new("ip")
        .args([
            "netns", "exec", ns, "nft", "-j", "list", "counter", "inet", table, name,
        ])
        .output()
        .expect("nft list counter");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("nft counter {name}: {e}: {out:?}"));
    let c = v["nftables"]
        .as_array()
        .and_then(|a| a.iter().find_map(|i| i.get("counter")))
        .unwrap_or_else(|| panic!("no counter {name} in {v}"));
    (
        c["packets"].as_i64().unwrap_or_default(),
        c["bytes"].as_i64().unwrap_or_default(),
    )
}

/// The TCP payload in what a counter counted: its bytes less an IPv4 and TCP header (with
/// timestamps, 52 bytes) per packet, so segmentation offload or not (one header per 64 KiB
/// or per 1.4 KiB) does not change the comparison with what the application sent.
fn payload((packets, bytes): (i64, i64)) -> i64 {
    bytes - packets * 52
}

pub async fn bandwidth(dp: Arc<Dp>) {
    let t = dp.tenant("metering").await;
    let v = dp.vm(&t, "meter-web", &["--external-ip-attachment"]).await;
    let (attachment, ext) = crate::scenarios::ready_attachment(&dp, &t, &v.id).await;
    let gws = dp.json(&t, &["get", "natgateways"]).await;
    let gateway = items(&gws)
        .first()
        .and_then(|g| g["id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no NAT gateway in {gws}"));
    let vns = dp.json(&t, &["get", "virtualnetworks"]).await;
    let vn = items(&vns)
        .first()
        .and_then(|g| g["id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no VirtualNetwork in {vns}"));

    let ns = names::router_ns(&vn);
    let table = names::vn_table(&vn);
    let dnat = meter::counter_names(MeterPath::Dnat, &attachment);
    let snat = meter::counter_names(MeterPath::Snat, &gateway);

    // In through the ExternalIP (tcp/22 is open by default), once the path answers.
    assert!(ping(EXT_NS, ext).await, "ping the external address");
    transfer(
        &v.ns,
        SocketAddr::new(any(v.ip), 22),
        EXT_NS,
        SocketAddr::new(ext, 22),
    )
    .await;
    let (ingress, egress) = recorded_at_least(&dp, &attachment, |r| r.0, SENT as i64).await;
    let kernel = kernel_counter(&ns, &table, &dnat.0);
    assert_eq!(ingress, kernel.1, "recorded = the dataplane's counter");
    assert!(
        within_2_percent(payload(kernel), SENT),
        "DNAT ingress recorded {ingress} in {} packets for {SENT} sent",
        kernel.0
    );
    assert!(
        egress > 0 && egress < ingress / 10,
        "DNAT egress (acks) {egress}"
    );

    // A restart of the server and a reset of the router's counters.
    dp.restart().await;
    let reset = std::process::Command::new("ip")
        .args([
            "netns", "exec", &ns, "nft", "reset", "counters", "table", "inet", &table,
        ])
        .output()
        .expect("nft reset");
    assert!(reset.status.success(), "nft reset: {reset:?}");

    // Out through the NAT gateway.
    let gw: IpAddr = EXT_GATEWAY.parse().expect("ip");
    let port = 7300;
    assert!(ping(&v.ns, gw).await, "ping the external host");
    transfer(
        EXT_NS,
        SocketAddr::new(gw, port),
        &v.ns,
        SocketAddr::new(gw, port),
    )
    .await;
    let (nat_in, nat_out) = recorded_at_least(&dp, &gateway, |r| r.1, SENT as i64).await;
    let kernel = kernel_counter(&ns, &table, &snat.1);
    assert_eq!(nat_out, kernel.1, "recorded = the dataplane's counter");
    assert!(
        within_2_percent(payload(kernel), SENT),
        "SNAT egress recorded {nat_out} in {} packets for {SENT} sent",
        kernel.0
    );
    assert!(
        nat_in > 0 && nat_in < nat_out / 10,
        "SNAT ingress (acks) {nat_in}"
    );

    // The attachment's bytes were neither lost nor doubled by the restart and the reset.
    let (after_in, _) = recorded(&dp, &attachment).await;
    assert!(
        after_in >= ingress && after_in - ingress < SENT as i64 / 100,
        "DNAT ingress changed to {after_in} (was {ingress})"
    );
    eprintln!(
        "    metering: DNAT in {ingress} / out {egress}; SNAT out {nat_out} / in {nat_in} (sent {SENT} each)"
    );

    // The counters go with their path: none of the deleted attachment's remains, the
    // gateway's stay.
    dp.ok(
        &t,
        &["delete", "externalipattachment", &attachment, "--wait"],
    )
    .await;
    let listed = std::process::Command::new("ip")
        .args([
            "netns", "exec", &ns, "nft", "-j", "list", "counters", "table", "inet", &table,
        ])
        .output()
        .expect("nft list counters");
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        !listed.contains(&dnat.0) && !listed.contains(&dnat.1),
        "the deleted attachment's counters remain: {listed}"
    );
    assert!(
        listed.contains(&snat.0) && listed.contains(&snat.1),
        "{listed}"
    );
}
