//! The wire form of a question and an answer (`ExplainReachabilityRequest` /
//! `ExplainReachabilityResponse`): validation naming the field, and conversion.

use pb::reachability_endpoint::Endpoint;

use super::{ClusterEndpoint, End, Explanation, ObjectRef, Protocol, Question, Verdict};
use crate::{Invalid, pb};

fn end(field: &str, e: Option<&pb::ReachabilityEndpoint>) -> Result<End, Invalid> {
    let Some(e) = e else {
        return Err(Invalid::new(
            field,
            "is required: set one of compute_instance, baremetal_instance, cluster, address, internet",
        ));
    };
    let non_empty = |name: &str, v: &str| {
        if v.trim().is_empty() {
            Err(Invalid::new(format!("{field}.{name}"), "is empty"))
        } else {
            Ok(v.trim().to_string())
        }
    };
    let endpoint = pb::ExternalIpAttachmentEndpoint::try_from(e.cluster_endpoint)
        .unwrap_or(pb::ExternalIpAttachmentEndpoint::Unspecified);
    let is_cluster = matches!(e.endpoint, Some(Endpoint::Cluster(_)));
    if !is_cluster && endpoint != pb::ExternalIpAttachmentEndpoint::Unspecified {
        return Err(Invalid::new(
            format!("{field}.cluster_endpoint"),
            "is only allowed with cluster",
        ));
    }
    let is_address = matches!(e.endpoint, Some(Endpoint::Address(_)));
    if !is_address && !e.virtual_network.is_empty() {
        return Err(Invalid::new(
            format!("{field}.virtual_network"),
            "is only allowed with address",
        ));
    }
    Ok(match &e.endpoint {
        None => {
            return Err(Invalid::new(
                field,
                "names no end: set one of compute_instance, baremetal_instance, cluster, address, internet",
            ));
        }
        Some(Endpoint::ComputeInstance(k)) => {
            End::ComputeInstance(non_empty("compute_instance", k)?)
        }
        Some(Endpoint::BaremetalInstance(k)) => {
            End::BareMetalInstance(non_empty("baremetal_instance", k)?)
        }
        Some(Endpoint::Cluster(k)) => {
            let which = match endpoint {
                pb::ExternalIpAttachmentEndpoint::Api => ClusterEndpoint::Api,
                pb::ExternalIpAttachmentEndpoint::Ingress => ClusterEndpoint::Ingress,
                pb::ExternalIpAttachmentEndpoint::Unspecified => {
                    return Err(Invalid::new(
                        format!("{field}.cluster_endpoint"),
                        "is required with cluster: EXTERNAL_IP_ATTACHMENT_ENDPOINT_API or _INGRESS",
                    ));
                }
            };
            End::Cluster(non_empty("cluster", k)?, which)
        }
        Some(Endpoint::Address(a)) => End::Address {
            address: a.trim().parse().map_err(|_| {
                Invalid::new(
                    format!("{field}.address"),
                    format!("'{a}' is not an IP address"),
                )
            })?,
            virtual_network: (!e.virtual_network.trim().is_empty())
                .then(|| e.virtual_network.trim().to_string()),
        },
        Some(Endpoint::Internet(true)) => End::Internet,
        Some(Endpoint::Internet(false)) => {
            return Err(Invalid::new(
                format!("{field}.internet"),
                "must be true when set",
            ));
        }
    })
}

/// Checks a request and turns it into a question; errors name the field.
pub fn question_from_request(r: &pb::ExplainReachabilityRequest) -> Result<Question, Invalid> {
    let source = end("source", r.source.as_ref())?;
    let destination = end("destination", r.destination.as_ref())?;
    let protocol = match pb::Protocol::try_from(r.protocol) {
        Ok(pb::Protocol::Tcp) => Protocol::Tcp,
        Ok(pb::Protocol::Udp) => Protocol::Udp,
        Ok(pb::Protocol::Icmp) => Protocol::Icmp,
        Ok(pb::Protocol::All) => {
            return Err(Invalid::new(
                "protocol",
                "PROTOCOL_ALL is not a probe: ask for PROTOCOL_TCP, PROTOCOL_UDP or PROTOCOL_ICMP",
            ));
        }
        _ => {
            return Err(Invalid::new(
                "protocol",
                "is required: PROTOCOL_TCP, PROTOCOL_UDP or PROTOCOL_ICMP",
            ));
        }
    };
    let port = match protocol {
        Protocol::Icmp if r.port != 0 => {
            return Err(Invalid::new("port", "ICMP has no port: leave it 0"));
        }
        Protocol::Icmp => 0,
        _ => match u16::try_from(r.port) {
            Ok(p) if p != 0 => p,
            _ => {
                return Err(Invalid::new(
                    "port",
                    format!("is required for TCP and UDP, 1-65535 (got {})", r.port),
                ));
            }
        },
    };
    Ok(Question {
        source,
        destination,
        protocol,
        port,
    })
}

fn object(o: &ObjectRef) -> pb::ReachabilityObject {
    pb::ReachabilityObject {
        kind: o.kind.display_name().to_string(),
        id: o.id.clone(),
        name: o.name.clone(),
    }
}

/// The wire form of an answer.
pub fn to_response(e: &Explanation) -> pb::ExplainReachabilityResponse {
    pb::ExplainReachabilityResponse {
        verdict: match e.verdict {
            Verdict::Reachable => pb::ReachabilityVerdict::Reachable,
            Verdict::Blocked => pb::ReachabilityVerdict::Blocked,
        } as i32,
        hops: e
            .hops
            .iter()
            .map(|h| pb::ReachabilityHop {
                kind: h.kind.as_str().to_string(),
                description: h.description.clone(),
                object: h.object.as_ref().map(object),
                source_address: h.source_address.clone(),
                destination_address: h.destination_address.clone(),
            })
            .collect(),
        deciding: e.deciding.clone(),
        deciding_object: e.deciding_object.as_ref().map(object),
        deciding_rule_index: i32::try_from(e.deciding_rule_index).unwrap_or(i32::MAX),
    }
}
