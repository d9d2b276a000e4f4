// The "Objects" view: per-kind tables of the tenant's objects (search, sort, details, edit,
// delete), the create button, the quota panel (the tenant's `status.usage`) and the metering
// usage (when the server offers it). Actions appear only where the role may take them; the
// server's 403 stays the authority.

import { $, el, shortState, stateClass } from './dom.js';
import { ApiError, call } from './api.js';
import { KIND_OF, WORKLOADS, attachmentTarget, nameOf, workloadNet } from './model.js';

/** The tables, in tab order. */
export const TABLE_KINDS = [
  'virtual_networks', 'subnets', 'security_groups', 'external_ips', 'nat_gateways',
  'compute_instances', 'baremetal_instances', 'clusters', 'external_ip_attachments',
];

/** Kinds a tenant-user may create, edit and delete (workloads and their external addresses). */
const TENANT_USER_WRITES = new Set([
  'external_ips', 'external_ip_attachments', 'compute_instances', 'baremetal_instances', 'clusters',
]);

/** Whether `role` may create, update and delete objects of `collection`. */
export function mayWrite(role, collection) {
  if (role === 'tenant-admin') return true;
  if (role === 'tenant-user') return TENANT_USER_WRITES.has(collection);
  return false; // the provider looks at a tenant's objects; it does not act for the tenant
}

function cidrs(spec) {
  return [spec.ipv4_cidr, spec.ipv6_cidr].filter(Boolean).join(', ');
}

/** The kind-specific columns: [heading, value(obj, ref)] with `ref(id)` → a name cell value. */
function columnsOf(collection) {
  const spec = (o) => o.spec || {};
  const status = (o) => o.status || {};
  switch (collection) {
    case 'virtual_networks':
      return [['CIDRs', (o) => cidrs(spec(o))]];
    case 'subnets':
      return [['network', (o, ref) => ref(spec(o).virtual_network)], ['CIDRs', (o) => cidrs(spec(o))]];
    case 'security_groups':
      return [['network', (o, ref) => ref(spec(o).virtual_network)],
        ['rules', (o) => `${(spec(o).ingress || []).length} in · ${(spec(o).egress || []).length} out`]];
    case 'external_ips':
      return [['address', (o) => status(o).address || '']];
    case 'nat_gateways':
      return [['network', (o, ref) => ref(spec(o).virtual_network)], ['external IP', (o, ref) => ref(spec(o).external_ip)]];
    case 'external_ip_attachments':
      return [['external IP', (o, ref) => ref(spec(o).external_ip)], ['workload', (o, ref) => ref(attachmentTarget(o))]];
    default: {
      if (!WORKLOADS[collection]) return [];
      return [
        ['subnets', (o, ref) => workloadNet(collection, o).subnets.map(ref).join(', ')],
        ['security groups', (o, ref) => workloadNet(collection, o).securityGroups.map(ref).join(', ')],
        ['address', (o) => { const n = workloadNet(collection, o); return [n.address, n.external].filter(Boolean).join(' · '); }],
      ];
    }
  }
}

export class ObjectsView {
  /**
   * @param ctx {live(): Live|null, role(): string, tenant(): string|null, provider(): bool,
   *             onSelect(id), forms: Forms}
   */
  constructor(ctx) {
    this.ctx = ctx;
    this.kind = 'virtual_networks';
    this.sort = { key: 'name', desc: false };
    this.quotaFor = undefined;
    $('obj-search').addEventListener('input', () => this.render());
    $('obj-create').addEventListener('click', () => this.ctx.forms.create(this.kind));
    $('kind-tabs').replaceChildren(...TABLE_KINDS.map((c) => el('button', {
      type: 'button', class: 'kind-tab', id: `kind-${c}`, 'data-collection': c, 'aria-pressed': 'false',
      onclick: () => { this.kind = c; this.sort = { key: 'name', desc: false }; this.render(); },
    }, KIND_OF[c] + 's')));
  }

  /** A referenced object's name (its id on hover); the id itself when it is not known. */
  refName(id) {
    if (!id) return '';
    const live = this.ctx.live();
    const hit = live && live.find(id);
    return hit ? nameOf(hit.obj) : id;
  }

  rows(live) {
    const cols = columnsOf(this.kind);
    const ref = (id) => this.refName(id);
    return [...live.get(this.kind).values()].map((obj) => ({
      obj,
      name: nameOf(obj),
      state: shortState(obj),
      cells: cols.map(([, f]) => String(f(obj, ref) || '')),
      created: (obj.metadata || {}).creation_timestamp || '',
    }));
  }

  render() {
    const live = this.ctx.live();
    for (const b of document.querySelectorAll('.kind-tab')) {
      const on = b.dataset.collection === this.kind;
      b.classList.toggle('active', on);
      b.setAttribute('aria-pressed', String(on));
    }
    const table = $('obj-table');
    const writable = mayWrite(this.ctx.role(), this.kind);
    $('obj-create').hidden = !writable || !live;
    $('obj-create').textContent = `Create ${KIND_OF[this.kind]}`;
    if (!live) {
      table.replaceChildren(el('p', { class: 'hint' }, 'Pick a tenant to see its objects.'));
      return;
    }
    const query = $('obj-search').value.trim().toLowerCase();
    const cols = columnsOf(this.kind);
    let rows = this.rows(live);
    if (query) {
      rows = rows.filter((r) => [r.name, r.obj.id, r.state, ...r.cells].some((t) => t.toLowerCase().includes(query)));
    }
    const keyOf = (r) => {
      if (this.sort.key === 'name') return r.name;
      if (this.sort.key === 'state') return r.state;
      if (this.sort.key === 'created') return r.created;
      return r.cells[Number(this.sort.key)] || '';
    };
    rows.sort((a, b) => keyOf(a).localeCompare(keyOf(b), undefined, { numeric: true }) || a.obj.id.localeCompare(b.obj.id));
    if (this.sort.desc) rows.reverse();
    const heading = (key, label) => {
      const on = this.sort.key === key;
      return el('th', { 'aria-sort': on ? (this.sort.desc ? 'descending' : 'ascending') : 'none' },
        el('button', {
          type: 'button', class: 'sort', 'data-sort': key,
          onclick: () => {
            this.sort = { key, desc: on ? !this.sort.desc : false };
            this.render();
          },
        }, label, on ? (this.sort.desc ? ' ▼' : ' ▲') : ''));
    };
    const edit = this.kind === 'security_groups' || WORKLOADS[this.kind];
    const body = rows.map((r) => el('tr', { 'data-id': r.obj.id, 'data-name': r.name },
      el('td', {}, el('button', {
        type: 'button', class: 'link name', title: r.obj.id, onclick: () => this.ctx.onSelect(r.obj.id),
      }, r.name)),
      el('td', {}, r.state && el('span', { class: `pill st-${stateClass(r.state)}` }, r.state)),
      r.cells.map((c) => el('td', {}, c)),
      el('td', { class: 'actions' },
        writable && edit && el('button', {
          type: 'button', class: 'secondary small', 'data-action': 'edit', 'aria-label': `Edit ${r.name}`,
          onclick: () => this.ctx.forms.edit(this.kind, r.obj),
        }, 'Edit'),
        writable && el('button', {
          type: 'button', class: 'danger small', 'data-action': 'delete', 'aria-label': `Delete ${r.name}`,
          onclick: () => this.ctx.forms.remove(this.kind, r.obj),
        }, 'Delete'))));
    table.replaceChildren(
      el('p', { class: 'hint', id: 'obj-count' }, `${rows.length} of ${live.get(this.kind).size} ${KIND_OF[this.kind]}s`),
      el('div', { class: 'scroll' }, el('table', { class: 'grid objects', id: 'obj-grid' },
        el('thead', {}, el('tr', {},
          heading('name', 'name'), heading('state', 'state'),
          cols.map(([h], i) => heading(String(i), h)),
          el('th', {}, el('span', { class: 'sr' }, 'actions')))),
        el('tbody', {}, body))),
    );
    // Quotas count objects: read them again when the number of objects changed.
    const counts = `${this.ctx.tenant()}|` + TABLE_KINDS.map((c) => live.get(c).size).join();
    if (counts !== this.counted) {
      this.counted = counts;
      this.refreshQuota();
    }
  }

  /** The quota panel: read when the tenant changes and after every change of the objects. */
  async refreshQuota() {
    const tenant = this.ctx.tenant();
    if (this.quotaBusy) {
      this.quotaAgain = true;
      return;
    }
    this.quotaBusy = true;
    const panel = $('quota');
    try {
      const q = this.ctx.provider() ? '?' + new URLSearchParams({ tenant: tenant || '' }) : '';
      const answer = tenant || !this.ctx.provider() ? await call('GET', '/console/api/quota' + q) : null;
      if (!answer) {
        panel.replaceChildren();
      } else {
        const usage = Object.entries(answer.usage || {}).sort(([a], [b]) => a.localeCompare(b));
        panel.replaceChildren(el('h2', {}, `Quotas of ${answer.tenant}`),
          el('table', { class: 'grid quota', id: 'quota-table' },
            el('tr', {}, ['quota', 'used', 'limit', ''].map((h) => el('th', {}, h))),
            usage.map(([name, u]) => {
              const limit = u.limit === null || u.limit === undefined ? null : Number(u.limit);
              const share = limit ? Math.min(100, Math.round((100 * Number(u.used || 0)) / limit)) : 0;
              return el('tr', { 'data-quota': name },
                el('td', { title: name }, name.replace(/_/g, ' ')),
                el('td', { class: 'num' }, String(u.used || 0)),
                el('td', { class: 'num' }, limit === null ? 'unlimited' : String(limit)),
                el('td', { class: 'meter-cell' }, limit !== null && el('meter', {
                  min: 0, max: 100, value: share, high: 80, optimum: 0, title: `${share}% used`,
                })));
            })));
      }
    } catch (e) {
      panel.replaceChildren(el('h2', {}, 'Quotas'), el('p', { class: 'error' }, e.message));
    } finally {
      this.quotaBusy = false;
    }
    if (this.quotaAgain) {
      this.quotaAgain = false;
      this.refreshQuota();
    }
  }

  /** The metering usage (`GET …/usage`), or why it is not shown. */
  async loadUsage() {
    const out = $('usage');
    if (this.ctx.provider()) {
      out.replaceChildren();
      return;
    }
    out.replaceChildren(el('h2', {}, 'Usage'), el('p', { class: 'hint' }, 'Loading…'));
    try {
      const u = await call('GET', '/api/fulfillment/v1/usage');
      const groups = u.groups || [];
      out.replaceChildren(el('h2', {}, 'Usage'),
        el('p', { class: 'hint' }, `${u.from || ''} → ${u.to || ''}${u.meter ? ' · ' + u.meter : ''}`),
        groups.length === 0 ? el('p', { class: 'hint' }, 'Nothing metered in this period.')
          : el('div', { class: 'scroll' }, el('table', { class: 'grid', id: 'usage-table' },
            el('tr', {}, ['group', 'resource seconds', 'ingress bytes', 'egress bytes'].map((h) => el('th', {}, h))),
            groups.map((g) => el('tr', {},
              el('td', {}, Object.entries(g.dimensions || {}).map(([k, v]) => `${k}=${this.refName(String(v))}`).join(', ') || 'all'),
              el('td', { class: 'num' }, String(g.resource_seconds || 0)),
              el('td', { class: 'num' }, String(g.ingress_bytes || 0)),
              el('td', { class: 'num' }, String(g.egress_bytes || 0)))))));
    } catch (e) {
      const missing = e instanceof ApiError && (e.status === 404 || e.status === 405);
      out.replaceChildren(el('h2', {}, 'Usage'),
        el('p', { class: missing ? 'hint' : 'error', id: 'usage-missing' }, missing ? 'Usage not available on this server.' : e.message));
    }
  }
}
