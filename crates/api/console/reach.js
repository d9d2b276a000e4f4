// "Can A reach B?": asks the reachability explainer
// (POST …/reachability:explain, docs/console.md) and shows the verdict, the deciding element and
// the hops, and hands the path to the picture.

import { $, el } from './dom.js';
import { call } from './api.js';
import { KIND_OF, WORKLOADS, nameOf } from './model.js';

const PROTOCOLS = ['PROTOCOL_TCP', 'PROTOCOL_UDP', 'PROTOCOL_ICMP'];

/** The choices of an end: workloads (clusters twice: API and ingress), the internet, an address. */
function endOptions(live) {
  const groups = [];
  for (const [collection, w] of Object.entries(WORKLOADS)) {
    const objs = [...live.get(collection).values()].sort((a, b) => nameOf(a).localeCompare(nameOf(b)));
    if (objs.length === 0) continue;
    const options = [];
    for (const obj of objs) {
      if (collection === 'clusters') {
        options.push(el('option', { value: `${w.field}:${obj.id}:API` }, `${nameOf(obj)} (API)`));
        options.push(el('option', { value: `${w.field}:${obj.id}:INGRESS` }, `${nameOf(obj)} (ingress)`));
      } else {
        options.push(el('option', { value: `${w.field}:${obj.id}` }, nameOf(obj)));
      }
    }
    groups.push(el('optgroup', { label: KIND_OF[collection] + 's' }, options));
  }
  return [
    el('option', { value: 'internet' }, 'the internet'),
    el('option', { value: 'address' }, 'an address…'),
    ...groups,
  ];
}

/** A `ReachabilityEndpoint` from a choice (and the address box for `address`). */
function endpoint(choice, address) {
  if (choice === 'internet') return { internet: true };
  if (choice === 'address') return { address: address.trim() };
  const [field, id, vip] = choice.split(':');
  const end = { [field]: id };
  if (vip) end.cluster_endpoint = `EXTERNAL_IP_ATTACHMENT_ENDPOINT_${vip}`;
  return end;
}

/** The packet's addresses at a hop: both when known, else the one that is ("to 1.2.3.4"). */
function hopAddresses(h) {
  const from = h.source_address;
  const to = h.destination_address;
  if (from && to) return `${from} → ${to}`;
  if (from) return `from ${from}`;
  if (to) return `to ${to}`;
  return '';
}

export class Reach {
  /**
   * @param ctx {live(): Live, tenant(): string|null, provider(): bool, onPath(path|null),
   *             onSelect(id)}
   */
  constructor(ctx) {
    this.ctx = ctx;
    this.signature = '';
    $('reach-form').addEventListener('submit', (e) => {
      e.preventDefault();
      this.explain();
    });
    $('reach-proto').replaceChildren(...PROTOCOLS.map((p) => el('option', { value: p }, p.replace('PROTOCOL_', ''))));
    $('reach-proto').addEventListener('change', () => this.syncInputs());
    for (const side of ['from', 'to']) $(`reach-${side}`).addEventListener('change', () => this.syncInputs());
    $('reach-clear').addEventListener('click', () => {
      $('reach-result').replaceChildren();
      this.ctx.onPath(null);
    });
  }

  /** Rebuilds the end choices when the workloads changed, keeping what was chosen. */
  update(live) {
    const sig = Object.keys(WORKLOADS)
      .map((c) => [...live.get(c).values()].map((o) => o.id + nameOf(o)).join())
      .join('|');
    if (sig === this.signature) return;
    this.signature = sig;
    for (const side of ['from', 'to']) {
      const select = $(`reach-${side}`);
      const was = select.value;
      select.replaceChildren(...endOptions(live));
      if ([...select.options].some((o) => o.value === was)) select.value = was;
      else if (side === 'to' && select.options.length > 2) select.selectedIndex = 2;
    }
    this.syncInputs();
  }

  syncInputs() {
    for (const side of ['from', 'to']) {
      $(`reach-${side}-addr`).hidden = $(`reach-${side}`).value !== 'address';
    }
    const icmp = $('reach-proto').value === 'PROTOCOL_ICMP';
    $('reach-port').disabled = icmp;
  }

  async explain() {
    const body = {
      source: endpoint($('reach-from').value, $('reach-from-addr').value),
      destination: endpoint($('reach-to').value, $('reach-to-addr').value),
      protocol: $('reach-proto').value,
      port: $('reach-proto').value === 'PROTOCOL_ICMP' ? 0 : Number($('reach-port').value || 0),
    };
    let path = '/api/fulfillment/v1/reachability:explain';
    if (this.ctx.provider()) {
      path = '/api/private/v1/reachability:explain';
      body.tenant = this.ctx.tenant() || '';
    }
    const out = $('reach-result');
    out.replaceChildren(el('p', { class: 'hint' }, 'Explaining…'));
    try {
      this.show(await call('POST', path, body));
    } catch (e) {
      out.replaceChildren(el('p', { class: 'error', id: 'reach-error' }, e.message));
      this.ctx.onPath(null);
    }
  }

  objectButton(o) {
    if (!o || !o.id) return null;
    return el('button', { class: 'link', type: 'button', title: o.id, onclick: () => this.ctx.onSelect(o.id) },
      `${o.kind} ${o.name || o.id.slice(0, 8)}`);
  }

  show(answer) {
    const reachable = answer.verdict === 'REACHABILITY_VERDICT_REACHABLE';
    const verdict = reachable ? 'reachable' : 'blocked';
    const hops = answer.hops || [];
    const deciding = answer.deciding_object;
    const rule = answer.deciding_rule_index ? ` (rule ${answer.deciding_rule_index})` : '';
    $('reach-result').replaceChildren(...[
      el('p', { class: `verdict ${verdict}`, id: 'reach-verdict', 'data-verdict': verdict }, reachable ? 'Reachable' : 'Blocked'),
      el('p', { class: 'deciding', id: 'reach-deciding' }, answer.deciding || ''),
      deciding && el('p', { class: 'deciding-object' }, 'Decided by ', this.objectButton(deciding), rule),
      el('ol', { class: 'hops', id: 'reach-hops' }, hops.map((h) => el('li', {},
        el('span', { class: 'hop-kind' }, h.kind || ''),
        el('span', { class: 'hop-text' }, h.description || ''),
        hopAddresses(h) && el('span', { class: 'hop-addr' }, hopAddresses(h)),
        this.objectButton(h.object)))),
    ].filter(Boolean));
    const ids = hops.map((h) => (h.object && h.object.id) || (h.kind === 'internet' ? 'internet' : null)).filter(Boolean);
    this.ctx.onPath({ ids, deciding: deciding && deciding.id, verdict });
  }
}
