//! Rules shared by the three workload kinds (see also docs/workloads.md): every attachment's
//! subnet and security groups exist in the writer's tenant (another tenant's ⇒ NOT_FOUND) and
//! are READY, all subnets are in one VirtualNetwork, security groups belong to that network;
//! VMs and clusters need a NetworkClass with a k8s manager. References are stored as ids.

use osac_model::kinds::workload::MachineAttachment;
use osac_model::net::Family;
use osac_model::{Kind, defaults, pb};
use osac_store::Record;
use serde_json::{Value, json};

use super::insert_new;
use crate::error::{ApiError, ApiResult};
use crate::request::RequestCtx;

/// One attachment as requested: where it sits in the body and what it references.
pub struct AttachmentInput<'a> {
    /// Path of the attachment, e.g. `spec.compute_network_attachments[0]`.
    pub field: String,
    pub subnet: &'a str,
    pub security_groups: &'a [String],
}

/// The resolved network of a workload.
pub struct Network {
    pub vn: Record,
    /// Subnet ids, in attachment order.
    pub subnets: Vec<String>,
    /// Security-group ids per attachment.
    pub security_groups: Vec<Vec<String>>,
}

/// The message when a workload names no subnet at all (only reachable through a malformed
/// request: omitted attachments are filled from the defaults).
pub fn no_attachments(field: &str) -> ApiError {
    ApiError::invalid(format!(
        "{field}: at least one network attachment is required"
    ))
}

/// The tenant's default subnet and security group, which a workload created without
/// attachments is attached to.
pub struct DefaultAttachment {
    /// Subnet id (the IPv4 default subnet, else the IPv6 one).
    pub subnet: String,
    /// The default security group's id.
    pub security_groups: Vec<String>,
}

/// The objects of `kind` labelled as the tenant's defaults (onboarding's, or the tenant-admin's
/// own, crate::default_label): at most one per kind (per IP family for subnets).
async fn labelled_defaults(cx: &mut RequestCtx<'_>, kind: Kind) -> ApiResult<Vec<Record>> {
    let page = cx
        .tx
        .list(&osac_store::ListQuery {
            tenant: Some(cx.tenant.clone()),
            filter: format!(
                "this.metadata.labels[\"{}\"] == \"true\"",
                defaults::DEFAULT_LABEL
            ),
            ..osac_store::ListQuery::all(kind)
        })
        .await?;
    Ok(page.items)
}

/// Finds the writer's default subnet (the IPv4 one, else the IPv6 one) and security group: the
/// objects labelled `osac.openshift.io/default: "true"`; FAILED_PRECONDITION with
/// [`defaults::NO_DEFAULTS_MESSAGE`] when the tenant has none. Their state is checked by the
/// normal attachment rules.
pub async fn default_attachment(cx: &mut RequestCtx<'_>) -> ApiResult<DefaultAttachment> {
    let subnets = labelled_defaults(cx, Kind::Subnet).await?;
    let has_v4 = |r: &&Record| {
        osac_model::refs::string_at(&r.body, "spec.ipv4_cidr").is_some_and(|c| !c.is_empty())
    };
    let subnet = subnets.iter().find(has_v4).or(subnets.first()).cloned();
    let sg = labelled_defaults(cx, Kind::SecurityGroup)
        .await?
        .into_iter()
        .next();
    match (subnet, sg) {
        (Some(subnet), Some(sg)) => {
            cx.notes.push((
                "PopulatedNetworkAttachmentsDefaults",
                format!(
                    "no network attachments given: using the default Subnet '{}' and SecurityGroup '{}'",
                    subnet.label(),
                    sg.label()
                ),
            ));
            Ok(DefaultAttachment {
                subnet: subnet.id,
                security_groups: vec![sg.id],
            })
        }
        _ => Err(ApiError::precondition(defaults::NO_DEFAULTS_MESSAGE)),
    }
}

/// Whether a workload body asks for `auto_external_ip_attachment` (an ExternalIP and its
/// attachment created with the workload).
pub fn wants_auto_external_ip(kind: Kind, body: &Value) -> bool {
    Kind::WORKLOADS.contains(&kind)
        && body.pointer("/spec/auto_external_ip_attachment") == Some(&json!(true))
}

/// The subnet that gives a workload its primary address (DNAT targets it).
fn primary_subnet(kind: Kind, body: &Value) -> String {
    let pick = |list: &str| {
        let atts = body
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        atts.iter()
            .find(|a| a.get("primary") == Some(&json!(true)))
            .or(atts.first())
            .and_then(|a| a.get("subnet"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match kind {
        Kind::ComputeInstance => pick("compute_network_attachments"),
        Kind::BareMetalInstance => pick("network_attachments"),
        _ => body
            .pointer("/spec/network_attachment/subnet")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    }
}

/// `auto_external_ip_attachment`: in the workload's transaction, an ExternalIP from
/// the automatically chosen pool (family of the primary subnet, class of its VirtualNetwork)
/// and a PENDING attachment to the
/// workload — two of each (API and INGRESS) for a cluster. No capacity ⇒ RESOURCE_EXHAUSTED and
/// the whole transaction, workload included, is rolled back.
pub async fn auto_external_ips(cx: &mut RequestCtx<'_>, rec: &Record) -> ApiResult<()> {
    if !wants_auto_external_ip(rec.kind, &rec.body) {
        return Ok(());
    }
    let subnet = primary_subnet(rec.kind, &rec.body);
    // Only immutable fields are read of the subnet (its CIDRs and VirtualNetwork) and of the
    // VirtualNetwork (its class): a kept copy of either will do.
    let subnet = cx.tx.get_stable(&subnet).await?;
    let ipv6_only = subnet.as_ref().is_some_and(|sn| {
        sn.body
            .pointer("/spec/ipv4_cidr")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    });
    let (family, ip_family) = if ipv6_only {
        (Family::V6, pb::IpFamily::Ipv6)
    } else {
        (Family::V4, pb::IpFamily::Ipv4)
    };
    // Pools of the class of the workload's VirtualNetwork only.
    let default_class = super::network_class::resolve_class(cx, "").await?.id;
    let vn = match &subnet {
        Some(sn) => cx.tx.get_stable(vn_of(sn)).await?,
        None => None,
    };
    let class = vn
        .as_ref()
        .map_or(default_class.as_str(), |v| {
            super::network_class::class_of(v, &default_class)
        })
        .to_string();
    let endpoints: &[pb::ExternalIpAttachmentEndpoint] = match rec.kind {
        Kind::Cluster => &[
            pb::ExternalIpAttachmentEndpoint::Api,
            pb::ExternalIpAttachmentEndpoint::Ingress,
        ],
        _ => &[pb::ExternalIpAttachmentEndpoint::Unspecified],
    };
    let metadata = || {
        Some(pb::Metadata {
            labels: [
                (
                    defaults::AUTO_PROVISIONED_LABEL.to_string(),
                    "true".to_string(),
                ),
                (
                    defaults::AUTO_PROVISIONED_FOR_LABEL.to_string(),
                    rec.id.clone(),
                ),
            ]
            .into(),
            ..Default::default()
        })
    };
    for endpoint in endpoints {
        let pool = super::external_ip::choose_pool(cx.tx, family, &class, &default_class).await?;
        let eip = pb::ExternalIp {
            metadata: metadata(),
            spec: Some(pb::ExternalIpSpec {
                pool: pool.id,
                ip_family: ip_family as i32,
            }),
            ..Default::default()
        };
        let eip = insert_new(cx, eip.into()).await?;
        let mut spec = pb::ExternalIpAttachmentSpec {
            external_ip: eip.id.clone(),
            target_endpoint: *endpoint as i32,
            ..Default::default()
        };
        match rec.kind {
            Kind::ComputeInstance => spec.compute_instance = rec.id.clone(),
            Kind::BareMetalInstance => spec.baremetal_instance = rec.id.clone(),
            _ => spec.cluster = rec.id.clone(),
        }
        let att = pb::ExternalIpAttachment {
            metadata: metadata(),
            spec: Some(spec),
            ..Default::default()
        };
        let att = insert_new(cx, att.into()).await?;
        let for_endpoint = if rec.kind == Kind::Cluster {
            let name = endpoint.as_str_name();
            format!(
                " for the {} endpoint",
                name.rsplit('_').next().unwrap_or(name)
            )
        } else {
            String::new()
        };
        let message = format!(
            "ExternalIP {} and ExternalIPAttachment {} created{for_endpoint}",
            eip.id, att.id
        );
        let event =
            osac_store::events::for_record(rec, false, "AutoProvisionedExternalIP", message);
        osac_store::events::record(cx.tx, event).await?;
    }
    Ok(())
}

fn vn_of(rec: &Record) -> &str {
    rec.body
        .pointer("/spec/virtual_network")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Resolves every attachment (see the module documentation) and locks what it references.
pub async fn resolve_attachments(
    cx: &mut RequestCtx<'_>,
    atts: &[AttachmentInput<'_>],
) -> ApiResult<Network> {
    let mut subnets: Vec<Record> = Vec::with_capacity(atts.len());
    let mut first: Option<(String, String)> = None;
    for a in atts {
        let field = format!("{}.subnet", a.field);
        let sn = super::resolve_referenced(cx, Kind::Subnet, &field, a.subnet).await?;
        match &first {
            None => first = Some((vn_of(&sn).to_string(), field)),
            Some((vn, first_field)) if vn.as_str() != vn_of(&sn) => {
                let theirs = label_of(cx, vn_of(&sn)).await?;
                let ours = label_of(cx, vn).await?;
                return Err(ApiError::invalid(format!(
                    "{field}: Subnet '{}' is in VirtualNetwork '{theirs}', but {first_field} is in VirtualNetwork '{ours}': all subnets of a workload must be in one VirtualNetwork",
                    sn.label()
                )));
            }
            Some(_) => {}
        }
        subnets.push(sn);
    }
    let Some((vn_id, _)) = first else {
        return Err(no_attachments("spec"));
    };
    // A subnet's VirtualNetwork never changes, nor the VN's NetworkClass: a stable read.
    let vn = cx.tx.get_stable(&vn_id).await?.ok_or_else(|| {
        ApiError::precondition(format!(
            "VirtualNetwork '{vn_id}' of the subnets does not exist"
        ))
    })?;
    let mut security_groups = Vec::with_capacity(atts.len());
    for a in atts {
        let field = format!("{}.security_groups", a.field);
        security_groups.push(resolve_security_groups(cx, &field, a.security_groups, &vn).await?);
    }
    let mut refs: Vec<(String, String)> = subnets
        .iter()
        .zip(atts)
        .map(|(s, a)| (s.id.clone(), format!("{}.subnet", a.field)))
        .collect();
    for (ids, a) in security_groups.iter().zip(atts) {
        for (j, id) in ids.iter().enumerate() {
            refs.push((id.clone(), format!("{}.security_groups[{j}]", a.field)));
        }
    }
    lock_refs(cx, refs).await?;
    Ok(Network {
        vn,
        subnets: subnets.into_iter().map(|s| s.id).collect(),
        security_groups,
    })
}

/// Resolves security-group references of one attachment: in the tenant, not FAILED, of `vn`,
/// none twice. Returns their ids.
pub async fn resolve_security_groups(
    cx: &mut RequestCtx<'_>,
    field: &str,
    keys: &[String],
    vn: &Record,
) -> ApiResult<Vec<String>> {
    osac_model::kinds::workload::security_group_refs(field, keys)?;
    let mut ids: Vec<String> = Vec::with_capacity(keys.len());
    for (j, key) in keys.iter().enumerate() {
        let f = format!("{field}[{j}]");
        let sg = super::resolve_referenced(cx, Kind::SecurityGroup, &f, key).await?;
        if vn_of(&sg) != vn.id {
            let theirs = label_of(cx, vn_of(&sg)).await?;
            return Err(ApiError::invalid(format!(
                "{f}: SecurityGroup '{}' belongs to VirtualNetwork '{theirs}', not to VirtualNetwork '{}' of the workload's subnets: a workload may only use security groups of its VirtualNetwork",
                sg.label(),
                vn.label()
            )));
        }
        if ids.contains(&sg.id) {
            return Err(ApiError::invalid(format!(
                "{f}: SecurityGroup '{}' is listed twice",
                sg.label()
            )));
        }
        ids.push(sg.id);
    }
    Ok(ids)
}

/// Share-locks referenced rows in id order (no lock-order deadlocks with exclusive lockers), so
/// a concurrent delete of a subnet or security group cannot pass its "in use" check while this
/// workload is written; fails if one is being deleted or FAILED. Shared: workloads created at
/// once on one subnet or security group do not wait for each other.
pub async fn lock_refs(cx: &mut RequestCtx<'_>, mut refs: Vec<(String, String)>) -> ApiResult<()> {
    refs.sort();
    refs.dedup_by(|a, b| a.0 == b.0);
    let ids: Vec<String> = refs.iter().map(|(id, _)| id.clone()).collect();
    let locked = cx.tx.lock_shared_all(&ids).await?;
    for (id, field) in refs {
        match locked.iter().find(|r| r.id == id) {
            // FAILED is checked here, on the locked row: the reference may have been resolved
            // from an older copy (`resolve_referenced`).
            Some(r) if r.deleted_at.is_none() => super::require_not_failed(r, &field)?,
            Some(r) => {
                return Err(ApiError::precondition(format!(
                    "{field}: {} '{}' is being deleted",
                    r.kind,
                    r.label()
                )));
            }
            None => {
                return Err(ApiError::not_found(format!(
                    "{field}: object '{id}' does not exist"
                )));
            }
        }
    }
    Ok(())
}

async fn label_of(cx: &mut RequestCtx<'_>, id: &str) -> ApiResult<String> {
    Ok(cx
        .tx
        .get(id)
        .await?
        .map(|r| r.label().to_string())
        .unwrap_or_else(|| id.to_string()))
}

/// VMs and clusters live on hosting clusters: the network's class needs a k8s manager.
/// `what` is "virtual machines" or "clusters"; `why` an optional explanation.
pub async fn require_k8s(
    cx: &mut RequestCtx<'_>,
    vn: &Record,
    what: &str,
    why: &str,
) -> ApiResult<()> {
    let class_id = vn
        .body
        .pointer("/spec/network_class")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // A class's k8s manager never changes once set; a stable read may miss one set an
    // instant ago on another replica (until its change notification arrives here).
    let class = cx.tx.get_stable(class_id).await?;
    let k8s = match &class {
        Some(c) => c.decode::<pb::NetworkClass>()?.k8s_manager,
        None => String::new(),
    };
    if k8s.is_empty() {
        return Err(ApiError::precondition(format!(
            "BM-only deployment: this NetworkClass has no k8s manager, so {what} are not available{why} (VirtualNetwork '{}' uses NetworkClass '{}')",
            vn.label(),
            class
                .as_ref()
                .map(|c| c.label().to_string())
                .unwrap_or_else(|| class_id.to_string())
        )));
    }
    Ok(())
}

/// [`resolve_attachments`] of a machine's attachments (the list at `field`), storing the ids
/// they resolved to in them; returns their VirtualNetwork.
pub async fn resolve_machine_attachments<A: MachineAttachment>(
    cx: &mut RequestCtx<'_>,
    field: &str,
    atts: &mut [A],
) -> ApiResult<Record> {
    let inputs: Vec<AttachmentInput<'_>> = atts
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let (subnet, security_groups) = a.subnet_and_groups();
            AttachmentInput {
                field: format!("{field}[{i}]"),
                subnet,
                security_groups,
            }
        })
        .collect();
    let net = resolve_attachments(cx, &inputs).await?;
    for ((a, subnet), sgs) in atts.iter_mut().zip(net.subnets).zip(net.security_groups) {
        let (a_subnet, a_groups) = a.subnet_and_groups_mut();
        *a_subnet = subnet;
        *a_groups = sgs;
    }
    Ok(net.vn)
}

/// [`update_security_groups`] of a machine's attachments (the list at `field`): `requested`
/// as the update asks, `stored` as before (its first subnet names the VirtualNetwork).
pub async fn update_machine_security_groups<A: MachineAttachment>(
    cx: &mut RequestCtx<'_>,
    field: &str,
    stored: &[A],
    requested: &mut [A],
) -> ApiResult<()> {
    let first = stored
        .first()
        .map(|a| a.subnet_and_groups().0.to_string())
        .unwrap_or_default();
    let groups = requested
        .iter_mut()
        .map(|a| a.subnet_and_groups_mut().1)
        .collect();
    update_security_groups(cx, field, &first, groups).await
}

/// The update of a workload's attachments: only their security groups may change. Resolves
/// each attachment's groups (names to ids, same VirtualNetwork as the workload's first
/// subnet — the VN cannot change) and locks them for the rest of the transaction.
/// `field` names the attachment list (`spec.compute_network_attachments`).
pub async fn update_security_groups(
    cx: &mut RequestCtx<'_>,
    field: &str,
    first_subnet: &str,
    attachment_groups: Vec<&mut Vec<String>>,
) -> ApiResult<()> {
    let vn = stored_vn(cx, first_subnet).await?;
    let mut refs = Vec::new();
    for (i, groups) in attachment_groups.into_iter().enumerate() {
        let field = format!("{field}[{i}].security_groups");
        *groups = resolve_security_groups(cx, &field, groups, &vn).await?;
        refs.extend(
            groups
                .iter()
                .enumerate()
                .map(|(j, id)| (id.clone(), format!("{field}[{j}]"))),
        );
    }
    lock_refs(cx, refs).await
}

/// The VirtualNetwork of a stored workload (the network of its first subnet).
pub async fn stored_vn(cx: &mut RequestCtx<'_>, subnet_id: &str) -> ApiResult<Record> {
    let sn = cx.tx.get(subnet_id).await?.ok_or_else(|| {
        ApiError::precondition(format!(
            "the workload's Subnet '{subnet_id}' no longer exists"
        ))
    })?;
    let vn_id = vn_of(&sn).to_string();
    cx.tx.get(&vn_id).await?.ok_or_else(|| {
        ApiError::precondition(format!(
            "the workload's VirtualNetwork '{vn_id}' no longer exists"
        ))
    })
}

/// Before the immutability check of an update: references the client wrote by name are
/// replaced with the stored id when they name the same object, and resolved defaults the
/// client left out (an attachment's interface and primary flag, a node set's
/// `fabric_interface`) are taken from the stored object, so a GET-modify-update round trip or
/// a body written with names only changes what it means to change.
pub async fn canonicalize_update(
    cx: &mut RequestCtx<'_>,
    kind: Kind,
    current: &Record,
    new_obj: &mut Value,
) -> ApiResult<()> {
    if kind == Kind::BareMetalInstance {
        canonicalize_template(cx, current, new_obj).await?;
    }
    let list = match kind {
        Kind::ComputeInstance => "compute_network_attachments",
        Kind::BareMetalInstance => "network_attachments",
        Kind::Cluster => {
            let cur = current
                .body
                .pointer("/spec/network_attachment/subnet")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if let Some(v) = new_obj.pointer_mut("/spec/network_attachment/subnet") {
                same_ref(cx, Kind::Subnet, &cx.tenant.clone(), &cur, v).await?;
            }
            let cur_sets = current
                .body
                .pointer("/spec/node_sets")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            if let Some(sets) = new_obj
                .pointer_mut("/spec/node_sets")
                .and_then(Value::as_object_mut)
            {
                for (name, ns) in sets.iter_mut() {
                    let Some(old) = cur_sets.get(name) else {
                        continue;
                    };
                    let old_type = old["host_type"].as_str().unwrap_or_default();
                    if let Some(v) = ns.get_mut("host_type") {
                        same_ref(cx, Kind::HostType, "", old_type, v).await?;
                    }
                    if let (Some(o), Some(f)) = (ns.as_object_mut(), old.get("fabric_interface"))
                        && o.get("fabric_interface")
                            .and_then(Value::as_str)
                            .is_none_or(str::is_empty)
                    {
                        o.insert("fabric_interface".into(), f.clone());
                    }
                }
            }
            return Ok(());
        }
        Kind::Host | Kind::BareMetalTemplate => {
            let cur = current
                .body
                .pointer("/spec/host_type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if let Some(v) = new_obj.pointer_mut("/spec/host_type") {
                same_ref(cx, Kind::HostType, "", &cur, v).await?;
            }
            return Ok(());
        }
        _ => return Ok(()),
    };
    let cur: Vec<Value> = current
        .body
        .pointer(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tenant = cx.tenant.clone();
    let Some(new) = new_obj
        .pointer_mut(&format!("/spec/{list}"))
        .and_then(Value::as_array_mut)
    else {
        return Ok(());
    };
    let same_len = new.len() == cur.len();
    let no_primary = new.iter().all(|a| a.get("primary") != Some(&json!(true)));
    for (a, old) in new.iter_mut().zip(&cur) {
        let old_subnet = old["subnet"].as_str().unwrap_or_default();
        if let Some(v) = a.get_mut("subnet") {
            same_ref(cx, Kind::Subnet, &tenant, old_subnet, v).await?;
        }
        let Some(o) = a.as_object_mut() else { continue };
        if kind == Kind::BareMetalInstance
            && o.get("interface")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            && let Some(i) = old.get("interface")
        {
            o.insert("interface".into(), i.clone());
        }
        if same_len && no_primary && old.get("primary") == Some(&json!(true)) {
            o.insert("primary".into(), json!(true));
        }
    }
    Ok(())
}

/// A BareMetalInstance's `host_type` and `template` written by name become the stored ids, and
/// a deprecated `catalog_item` naming the stored template is dropped (it was stored as
/// `template`).
async fn canonicalize_template(
    cx: &mut RequestCtx<'_>,
    current: &Record,
    new_obj: &mut Value,
) -> ApiResult<()> {
    let stored = |p: &str| {
        current
            .body
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (cur_type, cur_template) = (stored("/spec/host_type"), stored("/spec/template"));
    if let Some(v) = new_obj.pointer_mut("/spec/host_type") {
        same_ref(cx, Kind::HostType, "", &cur_type, v).await?;
    }
    if let Some(v) = new_obj.pointer_mut("/spec/template") {
        same_ref(cx, Kind::BareMetalTemplate, "", &cur_template, v).await?;
    }
    if let Some(v) = new_obj.pointer_mut("/spec/catalog_item") {
        same_ref(cx, Kind::BareMetalTemplate, "", &cur_template, v).await?;
        if !cur_template.is_empty()
            && v.as_str() == Some(cur_template.as_str())
            && let Some(spec) = new_obj.pointer_mut("/spec").and_then(Value::as_object_mut)
        {
            spec.remove("catalog_item");
        }
    }
    Ok(())
}

/// Replaces `v` (a name) with `stored_id` when the name resolves to that object.
async fn same_ref(
    cx: &mut RequestCtx<'_>,
    kind: Kind,
    tenant: &str,
    stored_id: &str,
    v: &mut Value,
) -> ApiResult<()> {
    let Some(given) = v.as_str().filter(|s| !s.is_empty() && *s != stored_id) else {
        return Ok(());
    };
    if let Some(r) = cx.tx.find_by_name(kind, tenant, given).await?
        && r.id == stored_id
    {
        *v = json!(stored_id);
    }
    Ok(())
}
