// What the console knows about the kinds it shows: collections, kind names as the API and the
// reachability explainer print them, and the network facts of a workload.

/** The tenant collections the picture is drawn from. */
export const TENANT_COLLECTIONS = [
  'virtual_networks', 'subnets', 'security_groups', 'external_ips', 'compute_instances',
  'baremetal_instances', 'clusters', 'external_ip_attachments', 'nat_gateways',
];

/** The provider collections of the provider's view. */
export const PROVIDER_COLLECTIONS = ['network_classes', 'external_ip_pools', 'hosts', 'tenants'];

/** The workload collections, with the explainer's endpoint field and a short badge. */
export const WORKLOADS = {
  compute_instances: { field: 'compute_instance', badge: 'VM' },
  baremetal_instances: { field: 'baremetal_instance', badge: 'BM' },
  clusters: { field: 'cluster', badge: 'K8s' },
};

/** Collection → kind name (as `ReachabilityObject.kind` and events' `object_kind` spell it). */
export const KIND_OF = {
  virtual_networks: 'VirtualNetwork',
  subnets: 'Subnet',
  security_groups: 'SecurityGroup',
  external_ips: 'ExternalIP',
  compute_instances: 'ComputeInstance',
  baremetal_instances: 'BareMetalInstance',
  clusters: 'Cluster',
  external_ip_attachments: 'ExternalIPAttachment',
  nat_gateways: 'NATGateway',
  network_classes: 'NetworkClass',
  external_ip_pools: 'ExternalIPPool',
  hosts: 'Host',
  tenants: 'Tenant',
};

/** The display name of an object: its name, else the start of its id. */
export function nameOf(obj) {
  const name = obj && obj.metadata && obj.metadata.name;
  return name || (obj && obj.id ? obj.id.slice(0, 8) : '?');
}

/**
 * The network facts of a workload: its attachments (subnet ids, security-group ids), the
 * primary subnet, its internal and external addresses.
 */
export function workloadNet(collection, obj) {
  const spec = obj.spec || {};
  const status = obj.status || {};
  let attachments = [];
  let statuses = [];
  if (collection === 'compute_instances') {
    attachments = spec.compute_network_attachments || [];
    statuses = status.compute_network_attachment_statuses || [];
  } else if (collection === 'baremetal_instances') {
    attachments = spec.network_attachments || [];
    statuses = status.network_attachment_statuses || [];
  } else if (spec.network_attachment) {
    attachments = [Object.assign({ primary: true }, spec.network_attachment)];
  }
  const primary = attachments.find((a) => a.primary) || attachments[0] || {};
  const securityGroups = [...new Set(attachments.flatMap((a) => a.security_groups || []))];
  const firstIp = (statuses.find((s) => s.primary) || statuses[0] || {}).ip_address;
  let address = status.internal_ip_address || firstIp || '';
  let external = status.external_ip_address || '';
  if (collection === 'clusters') {
    address = status.api_endpoint || '';
    // A cluster has an external address per endpoint: each is labelled with its endpoint.
    external = [
      status.external_ip_address && 'api ' + status.external_ip_address,
      status.ingress_external_ip_address && 'ingress ' + status.ingress_external_ip_address,
    ].filter(Boolean).join(', ');
  }
  return {
    subnet: primary.subnet || '',
    subnets: attachments.map((a) => a.subnet).filter(Boolean),
    securityGroups,
    address,
    external,
  };
}

/** The id of the workload an ExternalIPAttachment targets. */
export function attachmentTarget(att) {
  const spec = att.spec || {};
  return spec.compute_instance || spec.baremetal_instance || spec.cluster || '';
}
