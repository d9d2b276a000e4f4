// DOM helpers of the console. Every piece of server data reaches the page through these:
// text becomes text nodes (textContent), attributes go through setAttribute. Nothing is ever
// parsed as HTML, so a name like `<img src=x onerror=…>` is shown as those characters.

const SVG_NS = 'http://www.w3.org/2000/svg';

function fill(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = String(value);
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: `el('td', {class: 'x'}, 'text', otherNode)`. */
export function el(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element, same calling convention as `el`. */
export function svg(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** The element with this id (the page's own ids only). */
export function $(id) {
  return document.getElementById(id);
}

/** `COMPUTE_INSTANCE_STATE_RUNNING` → `RUNNING`. */
export function shortState(obj) {
  const state = obj && obj.status && obj.status.state;
  if (!state) return '';
  const i = state.indexOf('_STATE_');
  return i >= 0 ? state.slice(i + 7) : state;
}

/** The colour class of a state: ok (green), wait (amber), bad (red), gone (grey), none. */
export function stateClass(state) {
  switch (state) {
    case 'READY': case 'RUNNING': case 'ALLOCATED': case 'ASSIGNED': case 'FREE':
      return 'ok';
    case 'PENDING': case 'STARTING': case 'PROVISIONING': case 'PROGRESSING': case 'RESERVED':
      return 'wait';
    case 'FAILED': case 'DELETE_FAILED':
      return 'bad';
    case 'DELETING':
      return 'gone';
    default:
      return 'none';
  }
}

/** `text` cut to `max` characters with an ellipsis. */
export function clip(text, max) {
  const s = String(text || '');
  return s.length > max ? s.slice(0, max - 1) + '…' : s;
}
