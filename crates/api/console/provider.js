// The provider's view: the tenant picker and tables of the provider objects (network classes,
// external IP pools, hosts), kept live from the private API.

import { $, el, shortState, stateClass } from './dom.js';
import { nameOf } from './model.js';

const TENANT_KEY = 'osac-console-tenant';

function stateCell(obj) {
  const s = shortState(obj);
  return el('td', {}, el('span', { class: `pill st-${stateClass(s)}` }, s || '—'));
}

function table(title, id, headings, rows) {
  return el('section', { class: 'panel' },
    el('h2', {}, `${title} (${rows.length})`),
    rows.length === 0
      ? el('p', { class: 'hint' }, 'None.')
      : el('table', { class: 'grid', id }, el('tr', {}, headings.map((h) => el('th', {}, h))), rows));
}

function sorted(map) {
  return [...map.values()].sort((a, b) => nameOf(a).localeCompare(nameOf(b)));
}

export class ProviderView {
  /** @param onTenant called with a tenant name when the provider picks one */
  constructor(onTenant) {
    this.onTenant = onTenant;
    this.tenantSig = null;
    this.current = undefined;
    $('tenant-picker').addEventListener('change', (e) => this.pick(e.target.value));
  }

  /** The tenant chosen in this tab, if any. */
  tenant() {
    return sessionStorage.getItem(TENANT_KEY) || null;
  }

  pick(name) {
    this.current = name || null;
    if (name) sessionStorage.setItem(TENANT_KEY, name);
    else sessionStorage.removeItem(TENANT_KEY);
    this.onTenant(name || null);
  }

  render(live) {
    this.renderPicker(sorted(live.get('tenants')));
    const classes = sorted(live.get('network_classes')).map((c) => el('tr', {},
      el('td', {}, nameOf(c)), stateCell(c), el('td', {}, c.is_default ? 'default' : ''),
      el('td', {}, c.title || ''), el('td', {}, [c.fabric_manager, c.k8s_manager].filter(Boolean).join(', '))));
    const pools = sorted(live.get('external_ip_pools')).map((p) => {
      const s = p.status || {};
      const spec = p.spec || {};
      return el('tr', {},
        el('td', {}, nameOf(p)), stateCell(p),
        el('td', {}, (spec.ip_family || '').replace('IP_FAMILY_', '')),
        el('td', {}, (spec.cidrs || []).join(', ')),
        el('td', { class: 'num' }, `${s.allocated || 0} / ${s.total || 0}`),
        el('td', { class: 'num' }, String(s.available || 0)));
    });
    const hosts = sorted(live.get('hosts')).map((h) => {
      const s = h.status || {};
      const spec = h.spec || {};
      return el('tr', {},
        el('td', {}, nameOf(h)), stateCell(h), el('td', {}, spec.pool || ''),
        el('td', {}, s.assigned_to || ''), el('td', {}, s.message || ''));
    });
    const tenants = sorted(live.get('tenants')).map((t) => el('tr', {},
      el('td', {}, nameOf(t)), stateCell(t), el('td', {}, ((t.spec || {}).domains || []).join(', '))));
    $('provider').replaceChildren(
      table('Tenants', 'provider-tenants', ['name', 'state', 'domains'], tenants),
      table('Network classes', 'provider-classes', ['name', 'state', '', 'title', 'managers'], classes),
      table('External IP pools', 'provider-pools', ['name', 'state', 'family', 'CIDRs', 'allocated', 'available'], pools),
      table('Hosts', 'provider-hosts', ['name', 'state', 'pool', 'assigned to', 'message'], hosts),
    );
  }

  renderPicker(tenants) {
    const names = tenants.map(nameOf);
    const sig = names.join(',');
    if (sig === this.tenantSig) return;
    this.tenantSig = sig;
    const picker = $('tenant-picker');
    picker.replaceChildren(el('option', { value: '' }, '— pick a tenant —'), ...names.map((n) => el('option', { value: n }, n)));
    let chosen = this.tenant();
    if (chosen && !names.includes(chosen)) chosen = null;
    if (!chosen && names.length) chosen = names[0];
    picker.value = chosen || '';
    if (chosen !== this.current) this.pick(chosen);
  }
}
