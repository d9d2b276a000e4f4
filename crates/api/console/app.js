// The console's entry point: sign-in, the session (tenant or provider), the live copies of the
// tenant's network and of the provider objects, and the wiring of picture and panels.

import { $ } from './dom.js';
import { ApiError, call, token } from './api.js';
import { Live } from './live.js';
import { PROVIDER_COLLECTIONS, TENANT_COLLECTIONS, WORKLOADS } from './model.js';
import { Topology } from './topology.js';
import { Details } from './details.js';
import { Reach } from './reach.js';
import { ProviderView } from './provider.js';
import { ObjectsView } from './objects.js';
import { Forms } from './forms.js';

const state = {
  session: null,
  tenant: null,
  network: null, // Live of the tenant collections
  providerLive: null, // Live of the provider collections
  drawn: false,
  view: 'network',
};

const topology = new Topology($('topology'), select);
const details = new Details($('details'), find, select);
const reach = new Reach({
  live: () => state.network,
  tenant: () => state.tenant,
  provider: () => isProvider(),
  onPath: (path) => topology.showPath(path),
  onSelect: select,
});
const provider = new ProviderView(watchTenant);
const forms = new Forms({
  live: () => state.network,
  onDone: (id) => {
    if (id) select(id);
    objects.refreshQuota();
  },
});
const objects = new ObjectsView({
  live: () => state.network,
  role: () => (state.session ? state.session.role : ''),
  tenant: () => state.tenant,
  provider: () => isProvider(),
  onSelect: select,
  forms,
});

function isProvider() {
  return !!state.session && state.session.role === 'provider-admin';
}

function find(id) {
  return (state.network && state.network.find(id)) || (state.providerLive && state.providerLive.find(id)) || null;
}

function select(id) {
  topology.select(id);
  details.show(id);
}

function showLogin(message) {
  for (const live of [state.network, state.providerLive]) if (live) live.stop();
  state.network = state.providerLive = state.session = null;
  $('main').hidden = true;
  $('views').hidden = $('tenant-label').hidden = $('logout').hidden = true;
  forms.close();
  $('who').textContent = '';
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('token').focus();
}

function logout(message) {
  token.clear();
  showLogin(message);
}

function setStatus(status) {
  const live = $('live');
  if (status instanceof ApiError) {
    if (status.status === 401) return logout(`Signed out: ${status.message}`);
    live.dataset.status = 'error';
    live.textContent = status.message;
    return;
  }
  live.dataset.status = status;
  live.textContent = { connecting: 'connecting…', live: 'live', retrying: 'reconnecting…' }[status] || status;
}

function summary(live) {
  const count = (c) => live.get(c).size;
  const workloads = Object.keys(WORKLOADS).reduce((n, c) => n + count(c), 0);
  return `${state.tenant ? state.tenant + ': ' : ''}${count('virtual_networks')} networks · ` +
    `${count('subnets')} subnets · ${workloads} workloads · ${count('security_groups')} security groups · ` +
    `${count('external_ips')} external IPs`;
}

function networkChanged(live) {
  if (live !== state.network) return;
  topology.render(live);
  reach.update(live);
  details.refresh();
  $('summary').textContent = summary(live);
  $('picture-hint').hidden = live.get('virtual_networks').size > 0;
  $('picture-hint').textContent = 'This tenant has no virtual network yet.';
  if (state.view === 'objects') objects.render();
  if (!state.drawn) {
    state.drawn = true;
    // What the first-paint benchmark waits for.
    performance.mark('osac-topology-drawn');
    document.body.dataset.topology = 'drawn';
  }
}

/** Starts the live copy of a tenant's network (the caller's own for tenant tokens). */
function watchTenant(name) {
  if (state.network) state.network.stop();
  state.network = null;
  state.tenant = name;
  topology.showPath(null);
  details.clear();
  $('reach-result').replaceChildren();
  objects.render();
  if (isProvider() && !name) {
    $('topology').replaceChildren();
    $('summary').textContent = '';
    $('picture-hint').hidden = false;
    $('picture-hint').textContent = 'Pick a tenant to see its network.';
    return;
  }
  const params = { surface: 'fulfillment', collections: TENANT_COLLECTIONS };
  if (isProvider()) params.filter = `this.metadata.tenant == ${JSON.stringify(name)}`;
  state.network = new Live(params, networkChanged, setStatus).start();
}

function showView(which) {
  state.view = which;
  for (const view of ['network', 'objects', 'provider']) {
    $(view === 'network' ? 'picture' : view).hidden = view !== which;
    $(`view-${view}`).classList.toggle('active', view === which);
    $(`view-${view}`).setAttribute('aria-pressed', String(view === which));
  }
  if (which === 'objects') objects.render();
}

async function start() {
  try {
    state.session = await call('GET', '/console/api/session');
  } catch (e) {
    return logout(e instanceof ApiError && e.status === 401 ? `The token was refused: ${e.message}` : e.message);
  }
  const s = state.session;
  $('login').hidden = true;
  $('main').hidden = false;
  $('logout').hidden = false;
  $('who').textContent = `${s.subject} · ${s.role}${s.tenant ? ' · ' + s.tenant : ''}`;
  $('who').title = $('who').textContent;
  document.body.dataset.role = s.role;
  $('views').hidden = false;
  $('view-provider').hidden = !isProvider();
  showView('network');
  objects.loadUsage();
  if (isProvider()) {
    $('tenant-label').hidden = false;
    state.providerLive = new Live(
      { surface: 'private', collections: PROVIDER_COLLECTIONS },
      (live) => { if (live === state.providerLive) { provider.render(live); details.refresh(); } },
      () => {},
    ).start();
    // The tenant picker starts the tenant's network once the tenants are known.
  } else {
    watchTenant(s.tenant);
  }
  details.clear();
}

$('login-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const t = $('token').value.trim();
  if (!t) return;
  token.set(t);
  $('token').value = '';
  start();
});
$('logout').addEventListener('click', () => logout(''));
$('fit').addEventListener('click', () => topology.fit());
$('view-network').addEventListener('click', () => showView('network'));
$('view-objects').addEventListener('click', () => showView('objects'));
$('view-provider').addEventListener('click', () => showView('provider'));

if (token.get()) start();
else showLogin('');
