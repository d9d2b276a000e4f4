//! The periodic usage records carry the bytes: traffic injected into the sim fabric on an
//! ExternalIP attached to a VM (its attachment's DNAT path) and on a NAT gateway's SNAT path,
//! swept and recorded several times, between and after the sweeps: the bytes of the
//! ExternalIP's records sum to what went through its attachment, the gateway's to what went
//! through the gateway, and both equal what the usage query answers.

use chrono::{DateTime, SecondsFormat, Utc};
use osac_backends::NatPathKind;
use serde_json::{Value, json};

use crate::both_backends;
use crate::common::*;
use crate::metering_identity::sweep;

both_backends!(usage_records_carry_every_byte_once);

/// The bytes (ingress, egress) of every usage record about `subject`, summed, and how many.
async fn recorded(s: &TestServer, subject: &str) -> ((i64, i64), usize) {
    let mut sum = (0, 0);
    let mut n = 0;
    for e in s.store().outbox_peek(1_000_000).await.expect("outbox") {
        let v: Value = serde_json::from_str(&e.payload).expect("CloudEvent");
        if e.subject != subject || v["type"] != "org.osac.metering.networking.v1.usage" {
            continue;
        }
        let int = |f: &str| {
            v["data"][f]
                .as_str()
                .and_then(|b| b.parse::<i64>().ok())
                .expect("bytes as int64 text")
        };
        sum = (sum.0 + int("ingress_bytes"), sum.1 + int("egress_bytes"));
        n += 1;
    }
    (sum, n)
}

/// A usage record of every open interval up to now (what the controllers' periodic task does).
async fn record(s: &TestServer) {
    s.store()
        .record_usage(Utc::now())
        .await
        .expect("usage records");
}

fn rfc(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

async fn usage_records_carry_every_byte_once(backend: Backend) {
    let Some(s) = TestServer::start(backend).await else {
        return;
    };
    let start = Utc::now();
    let t = s.tenant("acme").await;
    let vn = t.ready_vn("net", "10.60.0.0/16").await;
    let subnet = t.ready_subnet("sn", &id(&vn), "10.60.1.0/24").await;
    let vm = t.running_vm("vm", &id(&subnet)).await;
    let eip = t.allocated_eip("web-ip", "").await;
    let att = t
        .create(
            "external_ip_attachments",
            json!({"metadata": {"name": "web"},
                   "spec": {"external_ip": id(&eip), "compute_instance": id(&vm)}}),
        )
        .await;
    t.wait(
        "external_ip_attachments",
        &id(&att),
        "EXTERNAL_IP_ATTACHMENT_STATE_READY",
    )
    .await;
    t.wait_until(
        &format!("{PUB}/external_ips/{}", id(&eip)),
        "attached",
        |o| o["status"]["attached"] == true,
    )
    .await;
    let gw_ip = t.allocated_eip("gw-ip", "").await;
    let gw = t
        .create(
            "nat_gateways",
            json!({"metadata": {"name": "gw"},
                   "spec": {"virtual_network": id(&vn), "external_ip": id(&gw_ip)}}),
        )
        .await;
    t.wait("nat_gateways", &id(&gw), "NAT_GATEWAY_STATE_READY")
        .await;
    // Records from before the traffic carry none.
    record(&s).await;

    let fabric = s.sim_fabric();
    let dnat = |i, e| fabric.inject_traffic(NatPathKind::ExternalIpAttachment, &id(&att), i, e);
    let snat = |i, e| fabric.inject_traffic(NatPathKind::NatGateway, &id(&gw), i, e);
    // Traffic and sweeps interleaved with records: a record after each sweep, a record with
    // two sweeps before it, a record with no new traffic, a dataplane reset.
    assert!(dnat(1000, 100) && snat(10, 1000));
    sweep(&s).await;
    record(&s).await;
    assert!(dnat(2000, 200));
    sweep(&s).await;
    assert!(dnat(3000, 300) && snat(20, 2000));
    sweep(&s).await;
    record(&s).await;
    record(&s).await;
    fabric.reset_counters();
    assert!(dnat(500, 50));
    sweep(&s).await;
    record(&s).await;
    sweep(&s).await;
    record(&s).await;

    let ((i, e), n) = recorded(&s, &format!("external_ips/{}", id(&eip))).await;
    assert!(n >= 5, "{n} records");
    assert_eq!(
        (i, e),
        (6500, 650),
        "every byte through the ExternalIP once"
    );
    let (gw_bytes, _) = recorded(&s, &format!("nat_gateways/{}", id(&gw))).await;
    assert_eq!(gw_bytes, (30, 3000), "every byte through the gateway once");
    let (vn_bytes, vn_records) = recorded(&s, &format!("virtual_networks/{}", id(&vn))).await;
    assert!(
        vn_records >= 5 && vn_bytes == (0, 0),
        "a network moves no bytes"
    );

    // The usage query answers the same bytes.
    let answer = t
        .get(&format!(
            "{PUB}/usage?from={}&to={}&group_by=object&meter=bandwidth",
            rfc(start - chrono::Duration::minutes(2)),
            rfc(Utc::now() + chrono::Duration::minutes(2))
        ))
        .await
        .ok();
    let bytes_of = |object: String| {
        answer["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .find(|g| g["dimensions"]["object"] == json!(object))
            .map(|g| {
                let n = |f: &str| g[f].as_str().and_then(|v| v.parse::<i64>().ok());
                (
                    n("ingress_bytes").unwrap_or(-1),
                    n("egress_bytes").unwrap_or(-1),
                )
            })
    };
    assert_eq!(bytes_of(id(&eip)), Some((i, e)), "{answer}");
    assert_eq!(bytes_of(id(&gw)), Some(gw_bytes), "{answer}");
    s.finish().await;
}
