// The details panel: the selected object's state, references, conditions, events, spec and
// status. Everything is rendered as text.

import { el, shortState, stateClass } from './dom.js';
import { call } from './api.js';
import { KIND_OF, nameOf } from './model.js';

const EVENTS = '/api/fulfillment/v1/events';

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

function when(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? String(ts) : d.toLocaleTimeString();
}

/** Every string in `value` that is the id of an object `find` knows, with where it was. */
function references(value, find, path = 'spec', out = []) {
  if (typeof value === 'string') {
    const hit = find(value);
    if (hit) out.push({ path, id: value, hit });
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => references(v, find, `${path}[${i}]`, out));
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) references(v, find, `${path}.${k}`, out);
  }
  return out;
}

export class Details {
  /**
   * @param root      the panel element
   * @param find      id → {collection, obj} of the objects on screen, or null
   * @param onSelect  called with an id when a reference is clicked
   */
  constructor(root, find, onSelect) {
    this.root = root;
    this.find = find;
    this.onSelect = onSelect;
    this.id = null;
    this.version = null;
    this.events = [];
    this.eventsError = null;
    this.fetching = null;
  }

  show(id) {
    this.id = id;
    this.version = null;
    this.events = [];
    this.eventsError = null;
    this.refresh();
  }

  clear() {
    this.id = null;
    this.root.replaceChildren(el('p', { class: 'hint' }, 'Click an object of the picture to see its details and events.'));
  }

  /** Re-renders when the selected object changed; events are read again then. */
  refresh() {
    if (!this.id) return this.clear();
    const hit = this.find(this.id);
    if (!hit) {
      this.root.replaceChildren(el('p', { class: 'hint' }, 'The selected object is gone.'));
      return;
    }
    const version = hit.obj.metadata && hit.obj.metadata.version;
    if (version === this.version && this.root.firstChild) return;
    this.version = version;
    this.render(hit);
    this.loadEvents(hit.obj.id);
  }

  async loadEvents(id) {
    const q = new URLSearchParams({
      filter: `this.spec.object_id == ${JSON.stringify(id)}`,
      order: 'metadata.creation_timestamp desc',
      limit: '50',
    });
    const mine = (this.fetching = Symbol('events'));
    try {
      const page = await call('GET', `${EVENTS}?${q}`);
      if (mine !== this.fetching || id !== this.id) return;
      this.events = page.items || [];
      this.eventsError = null;
    } catch (e) {
      if (mine !== this.fetching) return;
      this.eventsError = e.message;
    }
    const hit = this.find(id);
    if (hit) this.render(hit);
  }

  render({ collection, obj }) {
    const state = shortState(obj);
    const meta = obj.metadata || {};
    const status = obj.status || {};
    const rest = Object.assign({}, obj);
    delete rest.metadata;
    delete rest.status;
    delete rest.id;
    const refs = references(rest.spec || rest, this.find).filter((r) => r.id !== obj.id);
    const rows = [
      ['id', obj.id],
      ['tenant', meta.tenant],
      ['created', meta.creation_timestamp],
      ['creator', meta.creator],
      ['version', meta.version],
    ].filter(([, v]) => v !== undefined && v !== '');
    const conditions = status.conditions || [];
    const section = (title, ...body) => el('section', { class: 'block' }, el('h3', {}, title), ...body);
    this.root.replaceChildren(...[
      el('header', { class: 'details-head' },
        el('span', { class: 'kind' }, KIND_OF[collection] || collection),
        el('h2', { id: 'details-name', title: obj.id }, nameOf(obj)),
        state && el('span', { class: `pill st-${stateClass(state)}`, id: 'details-state' }, state)),
      status.message && el('p', { class: 'message' }, status.message),
      el('table', { class: 'facts' }, rows.map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, String(v))))),
      refs.length > 0 && section('References', el('ul', { class: 'refs' }, refs.map((r) =>
        el('li', {},
          el('span', { class: 'path' }, r.path + ' → '),
          el('button', { class: 'link', type: 'button', title: r.id, onclick: () => this.onSelect(r.id) },
            `${KIND_OF[r.hit.collection] || r.hit.collection} ${nameOf(r.hit.obj)}`))))),
      section('Events', this.eventsTable()),
      conditions.length > 0 && section('Conditions', el('table', { class: 'grid' },
        el('tr', {}, ['type', 'status', 'reason', 'message'].map((h) => el('th', {}, h))),
        conditions.map((c) => el('tr', {},
          el('td', {}, c.type || ''),
          el('td', {}, (c.status || '').replace('CONDITION_STATUS_', '')),
          el('td', {}, c.reason || ''),
          el('td', {}, c.message || ''))))),
      section('Spec', el('pre', { id: 'details-spec' }, pretty(rest))),
      section('Status', el('pre', { id: 'details-status' }, pretty(status))),
      (meta.labels || meta.annotations) && section('Labels and annotations',
        el('pre', { id: 'details-meta' }, pretty({ labels: meta.labels || {}, annotations: meta.annotations || {} }))),
    ].filter(Boolean));
  }

  eventsTable() {
    if (this.eventsError) return el('p', { class: 'error' }, this.eventsError);
    if (this.events.length === 0) return el('p', { class: 'hint' }, 'No events (they expire after an hour).');
    return el('table', { class: 'grid events', id: 'details-events' },
      el('tr', {}, ['time', 'reason', 'message'].map((h) => el('th', {}, h))),
      this.events.map((e) => {
        const spec = e.spec || {};
        const warn = spec.type === 'EVENT_TYPE_WARNING';
        return el('tr', { class: warn ? 'warning' : '' },
          el('td', { class: 'time' }, when((e.metadata || {}).creation_timestamp)),
          el('td', {}, spec.reason || ''),
          el('td', {}, spec.message || ''));
      }));
  }
}
