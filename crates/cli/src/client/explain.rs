//! `osac explain reach --from END --to END --protocol tcp|udp|icmp [--port N]`: asks the
//! server's reachability explainer whether a packet gets from one end to the other, and
//! prints the verdict, the hops with the packet's addresses at each, and the deciding element.
//!
//! Ends: `computeinstance/<x>`, `baremetalinstance/<x>`, `cluster/<x>:api|ingress` (kind
//! aliases as in `get`), `address/<ip>[@<virtual network>]`, `internet`.

use anyhow::{anyhow, bail};
use serde_json::{Value, json};

use super::args::ReachArgs;
use super::kind::{Kind, Scope};
use super::ops::ClientCtx;
use super::output::{OutputFormat, emit, to_json, to_yaml};

/// The request JSON of one end (`flag` names the option in errors).
pub fn end(flag: &str, s: &str) -> anyhow::Result<Value> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("internet") {
        return Ok(json!({"internet": true}));
    }
    let Some((kind, rest)) = s
        .split_once('/')
        .filter(|(k, r)| !k.is_empty() && !r.is_empty())
    else {
        bail!("{flag}: expected KIND/NAME, address/IP[@VN] or internet, got '{s}'");
    };
    if kind.eq_ignore_ascii_case("address") || kind.eq_ignore_ascii_case("ip") {
        return Ok(match rest.split_once('@') {
            Some((ip, vn)) => json!({"address": ip, "virtual_network": vn}),
            None => json!({"address": rest}),
        });
    }
    let kind = super::kind::parse(kind).map_err(|e| anyhow!("{flag}: {e}"))?;
    Ok(match kind {
        Kind::ComputeInstance => json!({"compute_instance": rest}),
        Kind::BareMetalInstance => json!({"baremetal_instance": rest}),
        Kind::Cluster => {
            let (name, which) = rest.rsplit_once(':').ok_or_else(|| {
                anyhow!("{flag}: a cluster end says which VIP: cluster/{rest}:api or :ingress")
            })?;
            let endpoint = match which.to_ascii_lowercase().as_str() {
                "api" => "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API",
                "ingress" => "EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS",
                _ => bail!("{flag}: cluster VIP '{which}' is not api or ingress"),
            };
            json!({"cluster": name, "cluster_endpoint": endpoint})
        }
        other => bail!(
            "{flag}: a {} is not an end; use computeinstance/, baremetalinstance/, cluster/…:api|ingress, address/ or internet",
            other.singular()
        ),
    })
}

/// The whole request JSON.
pub fn request(a: &ReachArgs) -> anyhow::Result<Value> {
    let protocol = match a.protocol.to_ascii_lowercase().as_str() {
        "tcp" => "PROTOCOL_TCP",
        "udp" => "PROTOCOL_UDP",
        "icmp" | "ping" => "PROTOCOL_ICMP",
        p => bail!("--protocol: '{p}' is not tcp, udp or icmp"),
    };
    let mut body = json!({
        "source": end("--from", &a.from)?,
        "destination": end("--to", &a.to)?,
        "protocol": protocol,
    });
    if let Some(p) = a.port {
        body["port"] = json!(p);
    }
    if let Some(t) = &a.tenant {
        body["tenant"] = json!(t);
    }
    Ok(body)
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn object(v: Option<&Value>) -> String {
    let Some(o) = v else { return String::new() };
    let label = match text(o, "name") {
        "" => text(o, "id"),
        n => n,
    };
    format!("{} '{label}'", text(o, "kind"))
}

/// The human form of an answer.
pub fn human(v: &Value) -> String {
    let verdict = text(v, "verdict").trim_start_matches("REACHABILITY_VERDICT_");
    let mut out = format!("{verdict}: {}\n", text(v, "deciding"));
    if let Some(o) = v.get("deciding_object") {
        let rule = v
            .get("deciding_rule_index")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let rule = if rule > 0 {
            format!(", rule {rule}")
        } else {
            String::new()
        };
        out.push_str(&format!("  decided by {}{rule}\n", object(Some(o))));
    }
    let hops = v
        .get("hops")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !hops.is_empty() {
        out.push_str("path:\n");
    }
    for (n, h) in hops.iter().enumerate() {
        let (src, dst) = (text(h, "source_address"), text(h, "destination_address"));
        let addrs = if src.is_empty() && dst.is_empty() {
            String::new()
        } else {
            format!("{src} → {dst}")
        };
        out.push_str(&format!(
            "  {:>2}. {:<8} {:<35} {}\n",
            n + 1,
            text(h, "kind"),
            addrs,
            text(h, "description")
        ));
    }
    out
}

/// `osac explain reach`.
pub async fn reach(ctx: &ClientCtx, a: &ReachArgs) -> anyhow::Result<()> {
    let body = request(a)?;
    let scope = if a.tenant.is_some() {
        Scope::Provider
    } else {
        Scope::Tenant
    };
    let url = ctx.api.endpoint(scope, &["reachability:explain"]);
    let answer = ctx
        .api
        .call(osac_client::Method::POST, url, Some(&body))
        .await?;
    let out = match a.output {
        OutputFormat::Json => to_json(&answer)?,
        OutputFormat::Yaml => to_yaml(&answer)?,
        _ => human(&answer),
    };
    emit(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_parse_with_aliases_and_refuse_the_rest() {
        assert_eq!(
            end("--from", "internet").unwrap(),
            json!({"internet": true})
        );
        assert_eq!(
            end("--from", "vm/a").unwrap(),
            json!({"compute_instance": "a"})
        );
        assert_eq!(
            end("--to", "address/10.0.0.5@net").unwrap(),
            json!({"address": "10.0.0.5", "virtual_network": "net"})
        );
        assert_eq!(
            end("--to", "cluster/c:ingress").unwrap()["cluster_endpoint"],
            "EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS"
        );
        assert!(end("--to", "cluster/c").is_err());
        assert!(
            end("--to", "subnet/s")
                .unwrap_err()
                .to_string()
                .starts_with("--to")
        );
        assert!(end("--to", "vm1").is_err());
    }

    #[test]
    fn human_output_shows_verdict_deciding_and_hops() {
        let v = json!({"verdict": "REACHABILITY_VERDICT_BLOCKED", "deciding": "why",
            "deciding_object": {"kind": "SecurityGroup", "id": "1", "name": "db"},
            "hops": [{"kind": "port", "description": "leaves x", "source_address": "10.0.1.5",
                      "destination_address": "10.0.1.6"}]});
        let out = human(&v);
        assert!(
            out.starts_with("BLOCKED: why\n  decided by SecurityGroup 'db'\n"),
            "{out}"
        );
        assert!(out.contains("10.0.1.5 → 10.0.1.6"), "{out}");
    }
}
