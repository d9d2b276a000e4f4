// The console's forms, in one modal <dialog>: create an object of a kind, edit a security
// group's rules or the security groups of a workload's attachments, confirm a delete. What the
// API answers to a refused request is shown as it is (the JSON error body's message), so the
// console never second-guesses the server's rules. Enter submits, Escape closes; focus starts
// on the first field and returns where it was.

import { $, el } from './dom.js';
import { call } from './api.js';
import { KIND_OF, WORKLOADS, nameOf } from './model.js';

const API = '/api/fulfillment/v1';
const PROTOCOLS = ['PROTOCOL_TCP', 'PROTOCOL_UDP', 'PROTOCOL_ICMP', 'PROTOCOL_ALL'];

/** The attachment list field of a workload's spec. */
const ATTACHMENTS = {
  compute_instances: 'compute_network_attachments',
  baremetal_instances: 'network_attachments',
  clusters: 'network_attachment',
};

let fieldSeq = 0;

/** A labelled input; `attrs.name` is the key read back by `values()`. */
function field(label, control, hint) {
  const id = `f-${++fieldSeq}`;
  control.id = id;
  return el('div', { class: 'field' }, el('label', { for: id }, label), control, hint && el('small', { class: 'hint' }, hint));
}

function input(name, attrs) {
  return el('input', Object.assign({ name, spellcheck: 'false', autocomplete: 'off' }, attrs || {}));
}

function select(name, options, attrs) {
  return el('select', Object.assign({ name }, attrs || {}),
    options.map(([value, label, title]) => el('option', { value, title }, label)));
}

/** `[id, name, id]` options of a collection of the live copy, by name. */
function choices(live, collection) {
  return [...live.get(collection).values()]
    .sort((a, b) => nameOf(a).localeCompare(nameOf(b)))
    .map((o) => [o.id, nameOf(o), o.id]);
}

/** Checkboxes of security groups (of one network when `vn` is given). */
function groupChecks(live, name, chosen, vn) {
  const groups = [...live.get('security_groups').values()]
    .filter((g) => !vn || (g.spec || {}).virtual_network === vn)
    .sort((a, b) => nameOf(a).localeCompare(nameOf(b)));
  if (groups.length === 0) return el('p', { class: 'hint' }, 'No security group.');
  return el('fieldset', { class: 'checks', 'data-name': name },
    el('legend', {}, 'Security groups'),
    groups.map((g) => el('label', { title: g.id },
      el('input', { type: 'checkbox', name, value: g.id, checked: chosen.includes(g.id) }), nameOf(g))));
}

/** One editable rule row. */
function ruleRow(rule) {
  const r = rule || { protocol: 'PROTOCOL_TCP', port_from: 443, port_to: 443, ipv4_cidr: '0.0.0.0/0' };
  const row = el('div', { class: 'rule' },
    select('protocol', PROTOCOLS.map((p) => [p, p.replace('PROTOCOL_', '')]), { 'aria-label': 'protocol' }),
    input('port_from', { type: 'number', min: 0, max: 65535, value: r.port_from || 0, 'aria-label': 'first port' }),
    input('port_to', { type: 'number', min: 0, max: 65535, value: r.port_to || 0, 'aria-label': 'last port' }),
    input('cidr', { value: r.ipv4_cidr || r.ipv6_cidr || '', placeholder: '0.0.0.0/0', 'aria-label': 'peer CIDR' }),
    el('button', { type: 'button', class: 'secondary small', 'aria-label': 'remove rule', onclick: () => row.remove() }, '✕'));
  row.querySelector('select').value = r.protocol || 'PROTOCOL_TCP';
  return row;
}

/** A list of rules with an "add" button; read back by `readRules`. */
function rulesEditor(title, key, rules) {
  const list = el('div', { class: 'rules', 'data-rules': key }, (rules || []).map(ruleRow));
  return el('fieldset', { class: 'rules-box' },
    el('legend', {}, title),
    el('div', { class: 'rule head', 'aria-hidden': 'true' },
      el('span', {}, 'protocol'), el('span', {}, 'from port'), el('span', {}, 'to port'), el('span', {}, 'peer CIDR'), el('span', {})),
    list,
    el('button', { type: 'button', class: 'secondary small', id: `add-${key}`, onclick: () => {
      const row = ruleRow();
      list.append(row);
      row.querySelector('select').focus();
    } }, `Add ${title.toLowerCase().replace(/s$/, '')}`));
}

function readRules(form, key) {
  return [...form.querySelectorAll(`[data-rules="${key}"] .rule`)].map((row) => {
    const v = (n) => row.querySelector(`[name="${n}"]`).value.trim();
    const rule = { protocol: v('protocol'), port_from: Number(v('port_from') || 0), port_to: Number(v('port_to') || 0) };
    const cidr = v('cidr');
    if (cidr.includes(':')) rule.ipv6_cidr = cidr;
    else rule.ipv4_cidr = cidr;
    return rule;
  });
}

export class Forms {
  /** @param ctx {live(): Live|null, onDone(id|null)} */
  constructor(ctx) {
    this.ctx = ctx;
    this.dialog = $('form-dialog');
    this.form = $('form');
    this.submit = null;
    this.returnTo = null;
    this.form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.run();
    });
    $('form-cancel').addEventListener('click', () => this.close());
    this.dialog.addEventListener('close', () => {
      if (this.returnTo && this.returnTo.isConnected) this.returnTo.focus();
    });
  }

  /** Opens the dialog: a title, fields, the submit label and what submitting does. */
  open(title, fields, label, submit, danger) {
    this.returnTo = document.activeElement;
    this.submit = submit;
    $('form-title').textContent = title;
    $('form-fields').replaceChildren(...fields.filter(Boolean));
    $('form-error').textContent = '';
    $('form-submit').textContent = label;
    $('form-submit').classList.toggle('danger', !!danger);
    $('form-submit').disabled = false;
    if (!this.dialog.open) this.dialog.showModal();
    const first = this.form.querySelector('#form-fields input, #form-fields select, #form-fields textarea') || $('form-submit');
    first.focus();
  }

  close() {
    if (this.dialog.open) this.dialog.close();
  }

  async run() {
    if (!this.submit) return;
    $('form-submit').disabled = true;
    $('form-error').textContent = '';
    try {
      const done = await this.submit(this.form);
      this.close();
      this.ctx.onDone(done && done.id ? done.id : null);
    } catch (e) {
      // The API's own words: its JSON error body's message, verbatim.
      $('form-error').textContent = e.message;
    } finally {
      $('form-submit').disabled = false;
    }
  }

  value(name) {
    const node = this.form.querySelector(`[name="${name}"]`);
    return node ? node.value.trim() : '';
  }

  checked(name) {
    return [...this.form.querySelectorAll(`input[name="${name}"]:checked`)].map((c) => c.value);
  }

  /** The create form of `collection`. */
  create(collection) {
    const live = this.ctx.live();
    if (!live) return;
    const kind = KIND_OF[collection];
    const name = field('Name', input('name', { required: true, placeholder: 'my-' + kind.toLowerCase() }),
      'lower-case letters, digits and -');
    const vnSelect = () => field('Virtual network', select('virtual_network', choices(live, 'virtual_networks'), { required: true }));
    const cidr4 = (ph) => field('IPv4 CIDR', input('ipv4_cidr', { placeholder: ph }));
    const cidr6 = () => field('IPv6 CIDR', input('ipv6_cidr', { placeholder: 'optional' }));
    const meta = () => ({ name: this.value('name') });
    const optional = (obj) => Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== '' && v !== undefined));
    const post = (spec) => call('POST', `${API}/${collection}`, { metadata: meta(), spec: optional(spec) });
    let fields = [name];
    let submit;
    switch (collection) {
      case 'virtual_networks':
        fields.push(cidr4('10.1.0.0/16'), cidr6());
        submit = () => post({ ipv4_cidr: this.value('ipv4_cidr'), ipv6_cidr: this.value('ipv6_cidr') });
        break;
      case 'subnets':
        fields.push(vnSelect(), cidr4('10.1.1.0/24'), cidr6());
        submit = () => post({ virtual_network: this.value('virtual_network'), ipv4_cidr: this.value('ipv4_cidr'), ipv6_cidr: this.value('ipv6_cidr') });
        break;
      case 'security_groups':
        fields.push(vnSelect(), rulesEditor('Ingress rules', 'ingress', []), rulesEditor('Egress rules', 'egress', []));
        submit = (form) => post({ virtual_network: this.value('virtual_network'), ingress: readRules(form, 'ingress'), egress: readRules(form, 'egress') });
        break;
      case 'external_ips':
        fields.push(field('Pool', input('pool', { placeholder: 'optional: a pool of the default class' })));
        submit = () => post({ pool: this.value('pool') });
        break;
      case 'nat_gateways':
        fields.push(vnSelect(), field('External IP', select('external_ip', choices(live, 'external_ips'), { required: true })));
        submit = () => post({ virtual_network: this.value('virtual_network'), external_ip: this.value('external_ip') });
        break;
      case 'external_ip_attachments': {
        const targets = Object.entries(WORKLOADS).flatMap(([c, w]) =>
          choices(live, c).map(([id, n]) => [`${w.field}:${id}`, `${w.badge} ${n}`, id]));
        fields.push(field('External IP', select('external_ip', choices(live, 'external_ips'), { required: true })),
          field('Workload', select('target', targets, { required: true })));
        submit = () => {
          const [f, id] = this.value('target').split(':');
          return post({ external_ip: this.value('external_ip'), [f]: id });
        };
        break;
      }
      default: {
        // Workloads: one attachment (the primary) with its security groups.
        const template = { compute_instances: ['template', 'small'], baremetal_instances: ['host_type', 'bm-standard'], clusters: ['template', 'ocp'] }[collection];
        fields.push(field(template[0] === 'template' ? 'Template' : 'Host type', input(template[0], { value: template[1], required: true })),
          collection === 'clusters' && field('Worker host type', input('worker_host_type', { value: 'bm-standard' })),
          collection === 'clusters' && field('Workers', input('workers', { type: 'number', min: 1, value: 1 })),
          field('Subnet', select('subnet', choices(live, 'subnets'), { required: true })),
          groupChecks(live, 'security_groups', []));
        submit = () => {
          const attachment = { subnet: this.value('subnet'), security_groups: this.checked('security_groups') };
          const spec = { [template[0]]: this.value(template[0]) };
          if (collection === 'clusters') {
            spec.network_attachment = attachment;
            spec.node_sets = { workers: { host_type: this.value('worker_host_type'), size: Number(this.value('workers') || 1) } };
          } else {
            spec[ATTACHMENTS[collection]] = [Object.assign({ primary: true }, attachment)];
          }
          return post(spec);
        };
      }
    }
    this.open(`Create ${kind}`, fields, 'Create', submit);
  }

  /** The edit form: a security group's rules, or a workload's attachments' security groups. */
  edit(collection, obj) {
    const live = this.ctx.live();
    if (!live) return;
    const spec = obj.spec || {};
    const path = `${API}/${collection}/${encodeURIComponent(obj.id)}`;
    if (collection === 'security_groups') {
      this.open(`Edit security group ${nameOf(obj)}`,
        [rulesEditor('Ingress rules', 'ingress', spec.ingress), rulesEditor('Egress rules', 'egress', spec.egress)],
        'Save',
        (form) => call('PATCH', `${path}?update_mask=spec.ingress,spec.egress`,
          { spec: { ingress: readRules(form, 'ingress'), egress: readRules(form, 'egress') } }));
      return;
    }
    const key = ATTACHMENTS[collection];
    if (!key) return;
    const list = collection === 'clusters' ? [spec.network_attachment || {}] : (spec[key] || []);
    const subnets = live.get('subnets');
    const fields = list.map((a, i) => {
      const subnet = subnets.get(a.subnet);
      const vn = subnet && (subnet.spec || {}).virtual_network;
      return el('section', { class: 'attachment' },
        el('h3', { title: a.subnet }, `Attachment ${i + 1}: subnet ${subnet ? nameOf(subnet) : a.subnet}${a.primary ? ' (primary)' : ''}`),
        groupChecks(live, `sg-${i}`, a.security_groups || [], vn));
    });
    this.open(`Edit ${KIND_OF[collection]} ${nameOf(obj)}`, fields, 'Save', () => {
      const changed = list.map((a, i) => Object.assign({}, a, { security_groups: this.checked(`sg-${i}`) }));
      const body = { spec: { [key]: collection === 'clusters' ? changed[0] : changed } };
      return call('PATCH', path, body);
    });
  }

  /** Asks, then deletes. */
  remove(collection, obj) {
    const kind = KIND_OF[collection];
    this.open(`Delete ${kind} ${nameOf(obj)}?`,
      [el('p', {}, `The ${kind} `, el('strong', { title: obj.id }, nameOf(obj)), ' is deleted: its controller undoes it in the network, then it is gone.')],
      'Delete',
      () => call('DELETE', `${API}/${collection}/${encodeURIComponent(obj.id)}`),
      true);
  }
}
