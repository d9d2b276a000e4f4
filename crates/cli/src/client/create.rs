//! `osac create …` and `osac admin create …`: flags → the API object, POST, optional wait.

use anyhow::{anyhow, bail};
use osac_client::Method;
use serde_json::{Map, Value, json};

use super::args::{
    AdminCreateKind, CidrArgs, CreateBareMetalInstance, CreateBareMetalInstanceType,
    CreateBareMetalTemplate, CreateCluster, CreateCommon, CreateComputeInstance, CreateExternalIp,
    CreateExternalIpAttachment, CreateHost, CreateHostType, CreateKind, CreateNatGateway,
    CreateNetworkClass, CreatePool, CreateSecurityGroup, CreateSubnet, CreateTenant, CreateToken,
    CreateVirtualNetwork, EndpointArg, ExternalIpArg, IpFamilyArg, MultiNicOptions,
    VirtualNetworkArg,
};
use super::kind::{Kind, Scope};
use super::ops::{
    ClientCtx, check_access, load_object_file, merge, note, print_objects, put, strip_read_only,
};
use super::output::{emit, object_label};
use super::parse::{
    Direction, Family, capability_field, cidr_family, parse_host_interfaces,
    parse_host_type_interface, parse_label, parse_network_port, parse_rules, split_cidrs,
};
use super::wait::{Goal, wait};
use super::workload::{
    AttachmentFor, attachments_json, mark_primary, parse_attachment_list, parse_network_attachment,
    parse_node_sets, parse_params,
};

fn flag_err(flag: &'static str) -> impl Fn(String) -> anyhow::Error {
    move |e| anyhow!("--{flag}: {e}")
}

fn family_arg(f: IpFamilyArg) -> Family {
    match f {
        IpFamilyArg::Ipv4 => Family::V4,
        IpFamilyArg::Ipv6 => Family::V6,
    }
}

/// `{"spec": spec}` (or `{}` when the spec is empty, so a file's spec is kept).
fn with_spec(top: Map<String, Value>, spec: Map<String, Value>) -> Value {
    let mut top = top;
    if !spec.is_empty() {
        top.insert("spec".into(), Value::Object(spec));
    }
    Value::Object(top)
}

/// The object a tenant create command describes (without name/labels, added later).
pub fn tenant_body(what: &CreateKind) -> anyhow::Result<(Kind, &CreateCommon, Value)> {
    let mut spec = Map::new();
    let (kind, common) = match what {
        CreateKind::Tenant(_) => {
            bail!("osac create tenant is a provider command: run it as osac admin create tenant")
        }
        CreateKind::VirtualNetwork(a) => {
            let CreateVirtualNetwork {
                cidrs: CidrArgs { cidrs },
                network_class,
                common,
            } = a;
            let (v4, v6) = split_cidrs(cidrs).map_err(flag_err("cidr"))?;
            put(&mut spec, "network_class", network_class.clone());
            put(&mut spec, "ipv4_cidr", v4);
            put(&mut spec, "ipv6_cidr", v6);
            (Kind::VirtualNetwork, common)
        }
        CreateKind::Subnet(a) => {
            let CreateSubnet {
                vn: VirtualNetworkArg { virtual_network },
                cidrs: CidrArgs { cidrs },
                common,
            } = a;
            let (v4, v6) = split_cidrs(cidrs).map_err(flag_err("cidr"))?;
            put(&mut spec, "virtual_network", virtual_network.clone());
            put(&mut spec, "ipv4_cidr", v4);
            put(&mut spec, "ipv6_cidr", v6);
            (Kind::Subnet, common)
        }
        CreateKind::SecurityGroup(a) => {
            let CreateSecurityGroup {
                vn: VirtualNetworkArg { virtual_network },
                ingress,
                egress,
                common,
            } = a;
            put(&mut spec, "virtual_network", virtual_network.clone());
            if !ingress.is_empty() {
                spec.insert(
                    "ingress".into(),
                    parse_rules(ingress, Direction::Ingress).map_err(flag_err("ingress"))?,
                );
            }
            if !egress.is_empty() {
                spec.insert(
                    "egress".into(),
                    parse_rules(egress, Direction::Egress).map_err(flag_err("egress"))?,
                );
            }
            (Kind::SecurityGroup, common)
        }
        CreateKind::ExternalIp(a) => {
            let CreateExternalIp {
                pool,
                ip_family,
                common,
            } = a;
            put(&mut spec, "pool", pool.clone());
            put(
                &mut spec,
                "ip_family",
                ip_family.map(|f| family_arg(f).enum_name()),
            );
            (Kind::ExternalIp, common)
        }
        CreateKind::ExternalIpAttachment(a) => {
            let CreateExternalIpAttachment {
                external_ip: ExternalIpArg { external_ip },
                compute_instance,
                cluster,
                baremetal_instance,
                endpoint,
                common,
            } = a;
            let targets = [compute_instance, cluster, baremetal_instance];
            if common.from_file.is_none() && targets.iter().all(|t| t.is_none()) {
                bail!(
                    "give the target: --compute-instance X, --cluster X --endpoint api|ingress, or --baremetal-instance X"
                );
            }
            if endpoint.is_some() && cluster.is_none() {
                bail!("--endpoint applies to --cluster targets only");
            }
            put(&mut spec, "external_ip", external_ip.clone());
            put(&mut spec, "compute_instance", compute_instance.clone());
            put(&mut spec, "cluster", cluster.clone());
            put(&mut spec, "baremetal_instance", baremetal_instance.clone());
            put(
                &mut spec,
                "target_endpoint",
                endpoint.map(|e| match e {
                    EndpointArg::Api => "EXTERNAL_IP_ATTACHMENT_ENDPOINT_API",
                    EndpointArg::Ingress => "EXTERNAL_IP_ATTACHMENT_ENDPOINT_INGRESS",
                }),
            );
            (Kind::ExternalIpAttachment, common)
        }
        CreateKind::NatGateway(a) => {
            let CreateNatGateway {
                vn: VirtualNetworkArg { virtual_network },
                external_ip: ExternalIpArg { external_ip },
                common,
            } = a;
            put(&mut spec, "virtual_network", virtual_network.clone());
            put(&mut spec, "external_ip", external_ip.clone());
            (Kind::NatGateway, common)
        }
        CreateKind::ComputeInstance(a) => {
            let CreateComputeInstance {
                template,
                network_attachments,
                nics,
                common,
            } = a;
            put(&mut spec, "template", template.clone());
            let field = "compute_network_attachments";
            put_nics(
                &mut spec,
                field,
                network_attachments,
                nics,
                AttachmentFor::Vm,
            )?;
            (Kind::ComputeInstance, common)
        }
        CreateKind::BareMetalInstance(a) => {
            let CreateBareMetalInstance {
                host_type,
                template,
                instance_type,
                image,
                ssh_public_key,
                ssh_public_key_file,
                user_data_file,
                run_strategy,
                restart_trigger,
                network_attachments,
                nics,
                common,
            } = a;
            put(&mut spec, "host_type", host_type.clone());
            put(&mut spec, "template", template.clone());
            put(&mut spec, "instance_type", instance_type.clone());
            put(&mut spec, "image", image.clone());
            let key = match ssh_public_key_file {
                Some(path) => Some(read_text(path, "ssh-public-key-file")?.trim().to_string()),
                None => ssh_public_key.clone(),
            };
            put(&mut spec, "ssh_public_key", key);
            let user_data = match user_data_file {
                Some(path) => Some(read_text(path, "user-data-file")?),
                None => None,
            };
            put(&mut spec, "user_data", user_data);
            put(
                &mut spec,
                "run_strategy",
                run_strategy.map(|r| r.enum_name()),
            );
            put(&mut spec, "restart_trigger", restart_trigger.clone());
            let field = "network_attachments";
            put_nics(
                &mut spec,
                field,
                network_attachments,
                nics,
                AttachmentFor::BareMetal,
            )?;
            (Kind::BareMetalInstance, common)
        }
        CreateKind::Cluster(a) => {
            let CreateCluster {
                template,
                network_attachment,
                node_sets,
                options,
                common,
            } = a;
            put(&mut spec, "template", template.clone());
            workload_common(&mut spec, &options.params, options.external_ip_attachment)?;
            if let Some(na) = network_attachment {
                let att = parse_network_attachment(na, AttachmentFor::Cluster)
                    .map_err(flag_err("network-attachment"))?;
                spec.insert("network_attachment".into(), att.to_json());
            }
            if !node_sets.is_empty() {
                spec.insert(
                    "node_sets".into(),
                    parse_node_sets(node_sets).map_err(flag_err("node-set"))?,
                );
            }
            (Kind::Cluster, common)
        }
    };
    Ok((kind, common, with_spec(Map::new(), spec)))
}

/// The text of a file named by `--flag`.
fn read_text(path: &std::path::Path, flag: &'static str) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| anyhow!("--{flag}: cannot read {}: {e}", path.display()))
}

/// `template_parameters` and `auto_external_ip_attachment`, shared by the workload kinds.
fn workload_common(
    spec: &mut Map<String, Value>,
    params: &[String],
    auto_external_ip: bool,
) -> anyhow::Result<()> {
    if !params.is_empty() {
        spec.insert(
            "template_parameters".into(),
            parse_params(params).map_err(flag_err("param"))?,
        );
    }
    put(
        spec,
        "auto_external_ip_attachment",
        auto_external_ip.then_some(true),
    );
    Ok(())
}

/// The `--network-attachment` flags of a VM or a bare-metal instance, with `--primary`
/// marking one of them, as its attachment list `field`; none given, the field stays unset (the
/// server attaches the tenant's defaults).
/// A VM's or bare-metal server's workload options and its attachments (`flags`) under `field`.
fn put_nics(
    spec: &mut Map<String, Value>,
    field: &str,
    flags: &[String],
    nics: &MultiNicOptions,
    of: AttachmentFor,
) -> anyhow::Result<()> {
    let o = &nics.options;
    workload_common(spec, &o.params, o.external_ip_attachment)?;
    put_network_attachments(spec, field, flags, nics.primary.as_deref(), of)
}

fn put_network_attachments(
    spec: &mut Map<String, Value>,
    field: &str,
    flags: &[String],
    primary: Option<&str>,
    of: AttachmentFor,
) -> anyhow::Result<()> {
    if flags.is_empty() {
        return Ok(());
    }
    let mut list = parse_attachment_list(flags, of).map_err(flag_err("network-attachment"))?;
    if let Some(subnet) = primary {
        mark_primary(&mut list, subnet).map_err(flag_err("primary"))?;
    }
    let atts = attachments_json(&list, of).map_err(flag_err("network-attachment"))?;
    spec.insert(field.into(), atts);
    Ok(())
}

/// The object a provider create command describes.
pub fn admin_body(what: &AdminCreateKind) -> anyhow::Result<Option<(Kind, &CreateCommon, Value)>> {
    let (mut top, mut spec) = (Map::new(), Map::new());
    let (kind, common) = match what {
        AdminCreateKind::NetworkClass(a) => {
            let CreateNetworkClass {
                fabric_manager,
                k8s_manager,
                is_default,
                title,
                description,
                default_vn_cidrs,
                default_subnet_cidrs,
                default_ingress,
                default_egress,
                enable_nat_gateway,
                no_nat_gateway,
                vip_prefix_length,
                disable_capabilities,
                common,
            } = a;
            put(&mut top, "title", title.clone());
            put(&mut top, "description", description.clone());
            put(&mut top, "fabric_manager", fabric_manager.clone());
            put(&mut top, "k8s_manager", k8s_manager.clone());
            put(&mut top, "is_default", is_default.then_some(true));
            let mut defaults = Map::new();
            let (v4, v6) = split_cidrs(default_vn_cidrs).map_err(flag_err("default-vn-cidr"))?;
            put(&mut defaults, "virtual_network_ipv4_cidr", v4);
            put(&mut defaults, "virtual_network_ipv6_cidr", v6);
            let (v4, v6) =
                split_cidrs(default_subnet_cidrs).map_err(flag_err("default-subnet-cidr"))?;
            put(&mut defaults, "subnet_ipv4_cidr", v4);
            put(&mut defaults, "subnet_ipv6_cidr", v6);
            if !default_ingress.is_empty() {
                let r = parse_rules(default_ingress, Direction::Ingress)
                    .map_err(flag_err("default-ingress"))?;
                defaults.insert("ingress_rules".into(), r);
            }
            if !default_egress.is_empty() {
                let r = parse_rules(default_egress, Direction::Egress)
                    .map_err(flag_err("default-egress"))?;
                defaults.insert("egress_rules".into(), r);
            }
            put(
                &mut defaults,
                "enable_nat_gateway",
                match (enable_nat_gateway, no_nat_gateway) {
                    (true, _) => Some(true),
                    (_, true) => Some(false),
                    _ => None,
                },
            );
            if !defaults.is_empty() {
                spec.insert("defaults".into(), Value::Object(defaults));
            }
            let mut disabled = Map::new();
            for c in disable_capabilities {
                disabled.insert(
                    capability_field(c)
                        .map_err(flag_err("disable-capability"))?
                        .into(),
                    json!(true),
                );
            }
            if !disabled.is_empty() {
                spec.insert("disable_capabilities".into(), Value::Object(disabled));
            }
            put(&mut spec, "vip_prefix_length", *vip_prefix_length);
            (Kind::NetworkClass, common)
        }
        AdminCreateKind::Pool(a) => {
            let CreatePool {
                cidrs,
                ip_family,
                network_class,
                common,
            } = a;
            put(&mut spec, "network_class", network_class.clone());
            let mut family = ip_family.map(family_arg);
            for c in cidrs {
                let f = cidr_family(c).map_err(flag_err("cidr"))?;
                match family {
                    Some(want) if want != f => bail!(
                        "--cidr: '{c}' is not an {} CIDR: a pool holds one address family",
                        want.label()
                    ),
                    _ => family = Some(f),
                }
            }
            put(&mut spec, "ip_family", family.map(Family::enum_name));
            if !cidrs.is_empty() {
                spec.insert("cidrs".into(), json!(cidrs));
            }
            (Kind::ExternalIpPool, common)
        }
        AdminCreateKind::HostType(a) => {
            let CreateHostType {
                interfaces,
                title,
                description,
                common,
            } = a;
            put(&mut top, "title", title.clone());
            put(&mut top, "description", description.clone());
            if !interfaces.is_empty() {
                let ifs = interfaces
                    .iter()
                    .map(|i| parse_host_type_interface(i))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(flag_err("interface"))?;
                top.insert("interfaces".into(), Value::Array(ifs));
            }
            (Kind::HostType, common)
        }
        AdminCreateKind::BareMetalTemplate(a) => {
            let CreateBareMetalTemplate {
                host_type,
                title,
                description,
                params,
                common,
            } = a;
            put(&mut spec, "host_type", host_type.clone());
            put(&mut spec, "title", title.clone());
            put(&mut spec, "description", description.clone());
            workload_common(&mut spec, params, false)?;
            (Kind::BareMetalTemplate, common)
        }
        AdminCreateKind::BareMetalInstanceType(a) => {
            let CreateBareMetalInstanceType {
                ports,
                host_types,
                title,
                description,
                common,
            } = a;
            put(&mut spec, "title", title.clone());
            put(&mut spec, "description", description.clone());
            if !ports.is_empty() {
                let ports = ports
                    .iter()
                    .map(|p| parse_network_port(p))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(flag_err("port"))?;
                spec.insert("hardware".into(), json!({"network_ports": ports}));
            }
            if !host_types.is_empty() {
                spec.insert("host_types".into(), json!(host_types));
            }
            (Kind::BareMetalInstanceType, common)
        }
        AdminCreateKind::Tenant(a) => {
            let CreateTenant {
                domains,
                quotas,
                common,
            } = a;
            if !domains.is_empty() {
                spec.insert("domains".into(), json!(domains));
            }
            let mut q = Map::new();
            for text in quotas {
                for (quota, limit) in osac_model::quota::parse_assignments("--quota", text)? {
                    q.insert(quota.name().into(), json!(limit));
                }
            }
            if !q.is_empty() {
                spec.insert("quotas".into(), Value::Object(q));
            }
            (Kind::Tenant, common)
        }
        AdminCreateKind::Host(a) => {
            let CreateHost {
                host_type,
                interfaces,
                pool,
                common,
            } = a;
            put(&mut spec, "host_type", host_type.clone());
            if !interfaces.is_empty() {
                let mut ifs = Vec::new();
                for i in interfaces {
                    ifs.extend(parse_host_interfaces(i).map_err(flag_err("interface"))?);
                }
                let mut seen = std::collections::HashSet::new();
                for i in &ifs {
                    let name = i["name"].as_str().unwrap_or_default();
                    if !seen.insert(name.to_string()) {
                        bail!("--interface: interface '{name}' is given twice");
                    }
                }
                spec.insert("interfaces".into(), Value::Array(ifs));
            }
            put(&mut spec, "pool", pool.map(|p| p.as_str()));
            (Kind::Host, common)
        }
        AdminCreateKind::Token(_) => return Ok(None),
    };
    Ok(Some((kind, common, with_spec(top, spec))))
}

/// `metadata.name` and `metadata.labels` from the flags.
fn metadata(common: &CreateCommon) -> anyhow::Result<Value> {
    let mut meta = Map::new();
    put(&mut meta, "name", common.name.clone());
    if !common.labels.is_empty() {
        let mut labels = Map::new();
        for l in &common.labels {
            let (k, v) = parse_label(l).map_err(flag_err("label"))?;
            labels.insert(k, json!(v));
        }
        meta.insert("labels".into(), Value::Object(labels));
    }
    Ok(if meta.is_empty() {
        json!({})
    } else {
        json!({ "metadata": meta })
    })
}

/// The full request body: the file (if any), overridden by the flags.
pub fn request_body(kind: Kind, common: &CreateCommon, flags: Value) -> anyhow::Result<Value> {
    let mut body = match &common.from_file {
        Some(p) => strip_read_only(kind, load_object_file(p)?),
        None => json!({}),
    };
    merge(&mut body, flags);
    merge(&mut body, metadata(common)?);
    Ok(body)
}

/// POSTs the object, waits if asked, prints the result.
async fn create(
    ctx: &ClientCtx,
    kind: Kind,
    common: &CreateCommon,
    flags: Value,
) -> anyhow::Result<()> {
    let verb = "create";
    check_access(kind, ctx.scope, verb, true)?;
    let body = request_body(kind, common, flags)?;
    let created = ctx
        .api
        .create_warned(ctx.scope, kind.collection(), &body)
        .await?;
    for w in &created.warnings {
        note(&format!("warning: {w}"));
    }
    let obj = created.body;
    let label = object_label(kind, &obj);
    if common.output.is_none() {
        let id = obj.get("id").and_then(Value::as_str).unwrap_or("?");
        emit(&format!("{label} created (id {id})\n"))?;
    }
    let mut last = obj;
    if common.wait.wait {
        let id = last
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let to_stderr = common.output.is_some();
        if let Some(o) = wait(
            &ctx.api,
            ctx.scope,
            kind,
            &id,
            &label,
            Goal::Ready,
            common.wait.timeout,
            to_stderr,
        )
        .await?
        {
            last = o;
        }
    }
    if let Some(f) = common.output {
        print_objects(ctx, kind, std::slice::from_ref(&last), f, true, None).await?;
    }
    Ok(())
}

/// `osac create …`.
pub async fn run_tenant(ctx: &ClientCtx, what: &CreateKind) -> anyhow::Result<()> {
    let (kind, common, flags) = tenant_body(what)?;
    create(ctx, kind, common, flags).await
}

/// `osac admin create …`.
pub async fn run_admin(ctx: &ClientCtx, what: &AdminCreateKind) -> anyhow::Result<()> {
    if let AdminCreateKind::Token(t) = what {
        return create_token(ctx, t).await;
    }
    match admin_body(what)? {
        Some((kind, common, flags)) => create(ctx, kind, common, flags).await,
        None => Ok(()),
    }
}

/// `osac admin create token`: prints the token alone, for `$(…)`.
async fn create_token(ctx: &ClientCtx, t: &CreateToken) -> anyhow::Result<()> {
    let mut body = Map::new();
    put(&mut body, "tenant", t.tenant.clone());
    body.insert("role".into(), json!(t.role.as_str()));
    put(&mut body, "subject", t.subject.clone());
    put(&mut body, "expires_in", t.expires_in.clone());
    put(&mut body, "expires_at", t.expires_at.clone());
    let url = ctx.api.endpoint(Scope::Provider, &["tokens"]);
    let resp = ctx
        .api
        .call(Method::POST, url, Some(&Value::Object(body)))
        .await?;
    let token = resp
        .get("token")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("the server's answer has no token"))?;
    emit(&format!("{token}\n"))
}

#[cfg(test)]
mod tests;
