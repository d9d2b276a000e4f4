// The console's client of the osac-net REST API: the bearer token (kept in sessionStorage,
// sent as the Authorization header, never in a URL), JSON calls, and the event stream of
// `/console/api/watch`, read with fetch because EventSource cannot send the header.

const TOKEN_KEY = 'osac-console-token';

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (t) => sessionStorage.setItem(TOKEN_KEY, t),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** An error answer of the API: HTTP status and the `{code, message}` body. */
export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = (body && body.code) || '';
  }
}

function headers(extra) {
  return Object.assign({ Authorization: 'Bearer ' + (token.get() || '') }, extra || {});
}

/** One JSON call: `call('GET', '/api/fulfillment/v1/subnets')`. */
export async function call(method, path, body) {
  const init = { method, headers: headers(), cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  const text = await resp.text();
  let value = null;
  try {
    value = text ? JSON.parse(text) : null;
  } catch (_) {
    value = { message: text };
  }
  if (!resp.ok) throw new ApiError(resp.status, value);
  return value;
}

/** Every object of a collection (all pages). */
export async function listAll(prefix, collection, filter) {
  const items = [];
  for (;;) {
    const q = new URLSearchParams({ limit: '1000', offset: String(items.length) });
    if (filter) q.set('filter', filter);
    const page = await call('GET', `${prefix}/${collection}?${q}`);
    items.push(...(page.items || []));
    if (!page.items || page.items.length < 1000 || items.length >= Number(page.total)) break;
  }
  return items;
}

/**
 * Reads `/console/api/watch` until it ends or `signal` aborts: `onEvent(event, data)` for every
 * server-sent event (`event` is `message` or `error`, `data` the parsed JSON).
 */
export async function watch(params, onEvent, signal) {
  const resp = await fetch('/console/api/watch?' + new URLSearchParams(params), {
    headers: headers({ Accept: 'text/event-stream' }),
    cache: 'no-store',
    credentials: 'omit',
    signal,
  });
  if (!resp.ok) {
    let body = null;
    try {
      body = await resp.json();
    } catch (_) { /* not JSON */ }
    throw new ApiError(resp.status, body);
  }
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let event = 'message';
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf('\n')) >= 0) {
      let line = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (data.length) onEvent(event, JSON.parse(data.join('\n')));
        event = 'message';
        data = [];
        continue;
      }
      if (line.startsWith(':')) continue; // keep-alive comment
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let text = colon < 0 ? '' : line.slice(colon + 1);
      if (text.startsWith(' ')) text = text.slice(1);
      if (field === 'data') data.push(text);
      else if (field === 'event') event = text;
    }
  }
}
