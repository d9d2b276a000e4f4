// The topology picture: an SVG drawn from the live objects of one tenant.
//
//   Internet ─ ExternalIPs (top band)
//   VirtualNetwork boxes, one under the other: subnets side by side, the workloads of each
//   subnet (by their primary attachment) as cards in a grid, the network's NAT gateway in its
//   header and its security groups in a row at the bottom.
//   Lines: ExternalIPAttachments (external IP → workload), NAT gateways (gateway → external IP),
//   security groups → the workloads they guard (all of them on small networks, those of the
//   selected object on large ones).
//
// Every text is an SVG text node (textContent); every node carries data-id, data-kind,
// data-name and data-state for the page's tests.

import { svg, shortState, stateClass, clip } from './dom.js';
import { KIND_OF, WORKLOADS, attachmentTarget, nameOf, workloadNet } from './model.js';

const PAD = 16;
const CARD_W = 172;
const CARD_H = 48;
const GAP = 10;
const EIP_W = 210;
const EIP_H = 34;
const SG_H = 26;
const SUBNET_HEAD = 46;
const VN_HEAD = 44;
/** Above this many security-group links only the selected object's are drawn. */
const MAX_SG_LINKS = 60;

function byName(a, b) {
  return nameOf(a).localeCompare(nameOf(b)) || a.id.localeCompare(b.id);
}

function sorted(map) {
  return [...map.values()].sort(byName);
}

/** Columns of a subnet's workload grid: one for a few, about square for many. */
function columns(n) {
  return n <= 6 ? 1 : Math.ceil(Math.sqrt(n / 2));
}

/** Places every object; returns {nodes, links, width, height, boxes}. */
function layout(live) {
  const nodes = new Map(); // id → {x, y, w, h, collection, obj, shape}
  const boxes = []; // VN and subnet frames, drawn first
  const put = (id, node) => nodes.set(id, node);

  const workloads = [];
  for (const collection of Object.keys(WORKLOADS)) {
    for (const obj of sorted(live.get(collection))) {
      workloads.push({ collection, obj, net: workloadNet(collection, obj) });
    }
  }
  const subnets = live.get('subnets');
  const bySubnet = new Map();
  const unplaced = [];
  for (const w of workloads) {
    if (subnets.has(w.net.subnet)) {
      if (!bySubnet.has(w.net.subnet)) bySubnet.set(w.net.subnet, []);
      bySubnet.get(w.net.subnet).push(w);
    } else {
      unplaced.push(w);
    }
  }
  const group = (collection) => {
    const out = new Map();
    for (const obj of sorted(live.get(collection))) {
      const vn = (obj.spec || {}).virtual_network || '';
      if (!out.has(vn)) out.set(vn, []);
      out.get(vn).push(obj);
    }
    return out;
  };
  const subnetsByVn = group('subnets');
  const sgsByVn = group('security_groups');
  const natsByVn = group('nat_gateways');

  // Virtual networks, each laid out at x = PAD from y = 0; shifted down below the band later.
  const vnLayouts = [];
  const frames = sorted(live.get('virtual_networks')).map((vn) => ({ vn, subnets: subnetsByVn.get(vn.id) || [] }));
  if (unplaced.length) frames.push({ vn: null, subnets: [] });
  let y = 0;
  let width = 0;
  for (const { vn, subnets: vnSubnets } of frames) {
    const items = [];
    let x = PAD * 2;
    let tallest = 0;
    const columnsOf = vn ? vnSubnets.map((s) => ({ subnet: s, members: bySubnet.get(s.id) || [] })) : [{ subnet: null, members: unplaced }];
    for (const { subnet, members } of columnsOf) {
      const cols = columns(members.length);
      const rows = Math.ceil(members.length / cols);
      const w = Math.max(cols * (CARD_W + GAP) - GAP + 2 * PAD, 210);
      const h = SUBNET_HEAD + Math.max(rows, 1) * (CARD_H + GAP) - GAP + PAD;
      items.push({ subnet, members, x, cols, w, h });
      x += w + GAP * 2;
      tallest = Math.max(tallest, h);
    }
    const sgs = vn ? sgsByVn.get(vn.id) || [] : [];
    // The header holds the name and the state line on the left and the NAT gateways on the
    // right: wide enough for both, so a gateway never covers the text.
    const nats = vn ? natsByVn.get(vn.id) || [] : [];
    const head = vn ? frameTexts('virtual_networks', vn) : { title: '', sub: '' };
    const headText = 28 + Math.max(head.title.length * 7.5, head.sub.length * 6.2) + PAD;
    const vnWidth = Math.max(x - GAP * 2, 420, headText + nats.length * 190 + PAD);
    // Security groups: chips wrapping at the network's width.
    const chips = [];
    let cx = PAD * 2;
    let cy = VN_HEAD + tallest + GAP * 2;
    for (const sg of sgs) {
      const w = Math.min(60 + nameOf(sg).length * 8, 210);
      if (cx + w > vnWidth - PAD && cx > PAD * 2) {
        cx = PAD * 2;
        cy += SG_H + GAP;
      }
      chips.push({ sg, x: cx, y: cy, w });
      cx += w + GAP;
    }
    const height = sgs.length ? cy + SG_H + PAD : VN_HEAD + tallest + PAD;
    vnLayouts.push({ vn, items, chips, y, width: vnWidth, height, nats });
    y += height + GAP * 3;
    width = Math.max(width, vnWidth + PAD * 2);
  }

  // The band on top: the internet and the external IPs, wrapping at the picture's width.
  const eips = sorted(live.get('external_ips'));
  width = Math.max(width, Math.min(eips.length, 6) * (EIP_W + GAP) + PAD * 3, 760);
  const internet = { x: PAD, y: PAD, w: width - PAD * 2, h: 34, shape: 'internet' };
  put('internet', internet);
  let ex = PAD * 2;
  let ey = internet.y + internet.h + 34;
  for (const eip of eips) {
    if (ex + EIP_W > width - PAD) {
      ex = PAD * 2;
      ey += EIP_H + GAP;
    }
    put(eip.id, { x: ex, y: ey, w: EIP_W, h: EIP_H, collection: 'external_ips', obj: eip, shape: 'eip' });
    ex += EIP_W + GAP;
  }
  const top = (eips.length ? ey + EIP_H : internet.y + internet.h) + 56;

  for (const v of vnLayouts) {
    const vy = top + v.y;
    if (v.vn) put(v.vn.id, { x: PAD, y: vy, w: v.width, h: v.height, collection: 'virtual_networks', obj: v.vn, shape: 'vn' });
    else boxes.push({ x: PAD, y: vy, w: v.width, h: v.height, title: 'Workloads on no visible subnet', shape: 'vn' });
    let nx = PAD + v.width - PAD;
    for (const nat of v.nats) {
      nx -= 190;
      put(nat.id, { x: nx, y: vy + 8, w: 180, h: 28, collection: 'nat_gateways', obj: nat, shape: 'nat' });
    }
    for (const it of v.items) {
      const sx = PAD + it.x - PAD;
      const sy = vy + VN_HEAD;
      if (it.subnet) put(it.subnet.id, { x: sx, y: sy, w: it.w, h: it.h, collection: 'subnets', obj: it.subnet, shape: 'subnet' });
      it.members.forEach((w, i) => {
        const col = i % it.cols;
        const row = Math.floor(i / it.cols);
        put(w.obj.id, {
          x: sx + PAD + col * (CARD_W + GAP),
          y: sy + SUBNET_HEAD + row * (CARD_H + GAP),
          w: CARD_W, h: CARD_H, collection: w.collection, obj: w.obj, net: w.net, shape: 'card',
        });
      });
    }
    for (const c of v.chips) {
      put(c.sg.id, { x: PAD + c.x - PAD, y: vy + c.y, w: c.w, h: SG_H, collection: 'security_groups', obj: c.sg, shape: 'sg' });
    }
  }
  const height = top + y + PAD;

  // Links.
  const links = [];
  for (const att of sorted(live.get('external_ip_attachments'))) {
    const from = (att.spec || {}).external_ip;
    const to = attachmentTarget(att);
    if (nodes.has(from) && nodes.has(to)) links.push({ from, to, kind: 'attachment', obj: att });
  }
  for (const nat of live.get('nat_gateways').values()) {
    const eip = (nat.spec || {}).external_ip;
    if (nodes.has(eip) && nodes.has(nat.id)) links.push({ from: eip, to: nat.id, kind: 'nat', obj: nat });
  }
  for (const eip of eips) links.push({ from: 'internet', to: eip.id, kind: 'uplink' });
  const sgLinks = [];
  for (const w of workloads) {
    for (const sg of w.net.securityGroups) {
      if (nodes.has(sg) && nodes.has(w.obj.id)) sgLinks.push({ from: sg, to: w.obj.id, kind: 'sg' });
    }
  }
  return { nodes, links, sgLinks, boxes, width, height };
}

function center(n) {
  return { x: n.x + n.w / 2, y: n.y + n.h / 2 };
}

/** A smooth vertical curve from the bottom of `a` to the top of `b` (or the reverse). */
function curve(a, b) {
  const [top, bottom] = a.y <= b.y ? [a, b] : [b, a];
  const x1 = top.x + top.w / 2;
  const y1 = top.y + top.h;
  const x2 = bottom.x + bottom.w / 2;
  const y2 = bottom.y;
  const dy = Math.max((y2 - y1) / 2, 20);
  return `M${x1},${y1} C${x1},${y1 + dy} ${x2},${y2 - dy} ${x2},${y2}`;
}

function label(n) {
  return n.obj ? nameOf(n.obj) : '';
}

function nodeGroup(id, n, cls) {
  const state = n.obj ? shortState(n.obj) : '';
  return svg('g', {
    class: `node ${n.shape} ${cls || ''} st-${stateClass(state)}`,
    'data-id': id,
    'data-kind': n.collection ? KIND_OF[n.collection] : 'Internet',
    'data-name': label(n),
    'data-state': state,
    transform: `translate(${n.x},${n.y})`,
    // Reachable by Tab; Enter or Space selects (see listen()).
    tabindex: n.obj ? 0 : undefined,
    role: n.obj ? 'button' : undefined,
    'aria-label': n.obj ? `${KIND_OF[n.collection]} ${label(n)}` : undefined,
  });
}

/** The two header lines of a network or subnet frame. */
function frameTexts(collection, obj) {
  const spec = obj.spec || {};
  const cidrs = [spec.ipv4_cidr, spec.ipv6_cidr].filter(Boolean).join('  ');
  return {
    title: clip(nameOf(obj), 40),
    sub: `${KIND_OF[collection]} · ${shortState(obj)}${cidrs ? ' · ' + cidrs : ''}`,
  };
}

function drawFrame(id, n) {
  const g = nodeGroup(id, n);
  const head = n.shape === 'vn' ? VN_HEAD : SUBNET_HEAD;
  const texts = frameTexts(n.collection, n.obj);
  g.append(
    svg('rect', { class: 'frame', width: n.w, height: n.h, rx: n.shape === 'vn' ? 14 : 10 }),
    svg('rect', { class: 'frame-head', width: n.w, height: head - 8, rx: n.shape === 'vn' ? 14 : 10 }),
    svg('circle', { class: 'dot', cx: 16, cy: 17, r: 5 }),
    svg('text', { class: 'title', x: 28, y: 21 }, texts.title),
    svg('text', { class: 'sub', x: 28, y: 34 }, texts.sub),
    svg('title', {}, `${KIND_OF[n.collection]} ${label(n)} · id ${n.obj.id}`),
  );
  return g;
}

function drawCard(id, n) {
  const g = nodeGroup(id, n);
  const badge = WORKLOADS[n.collection].badge;
  const addr = [n.net.address, n.net.external && '↗ ' + n.net.external].filter(Boolean).join('  ');
  g.append(
    svg('rect', { class: 'card-bg', width: n.w, height: n.h, rx: 8 }),
    svg('rect', { class: 'bar', width: 5, height: n.h, rx: 2 }),
    svg('rect', { class: 'badge-bg', x: 11, y: 7, width: 28, height: 16, rx: 4 }),
    svg('text', { class: 'badge', x: 25, y: 19, 'text-anchor': 'middle' }, badge),
    svg('text', { class: 'title', x: 44, y: 19 }, clip(label(n), 17)),
    svg('text', { class: 'sub', x: 14, y: 37 }, clip(addr || shortState(n.obj), 30)),
    svg('circle', { class: 'dot', cx: n.w - 12, cy: 14, r: 5 }),
    svg('title', {}, `${KIND_OF[n.collection]} ${label(n)} · ${shortState(n.obj)}${addr ? ' · ' + addr : ''} · id ${n.obj.id}`),
  );
  return g;
}

function drawChip(id, n, text) {
  const g = nodeGroup(id, n);
  g.append(
    svg('rect', { class: 'chip-bg', width: n.w, height: n.h, rx: n.h / 2 }),
    svg('circle', { class: 'dot', cx: 13, cy: n.h / 2, r: 4.5 }),
    svg('text', { class: 'title', x: 24, y: n.h / 2 + 4 }, text),
    svg('title', {}, n.obj ? `${KIND_OF[n.collection]} ${label(n)} · ${shortState(n.obj)} · id ${n.obj.id}` : 'Internet'),
  );
  return g;
}

function drawNode(id, n) {
  switch (n.shape) {
    case 'vn':
    case 'subnet':
      return drawFrame(id, n);
    case 'card':
      return drawCard(id, n);
    case 'eip': {
      const addr = (n.obj.status || {}).address;
      return drawChip(id, n, clip(addr ? `${label(n)}  ${addr}` : label(n), 28));
    }
    case 'nat':
      return drawChip(id, n, clip('NAT ' + label(n), 24));
    case 'sg':
      return drawChip(id, n, clip('SG ' + label(n), Math.floor((n.w - 30) / 7)));
    default: {
      const g = nodeGroup(id, n, 'internet');
      g.append(
        svg('rect', { class: 'internet-bg', width: n.w, height: n.h, rx: n.h / 2 }),
        svg('text', { class: 'title', x: n.w / 2, y: n.h / 2 + 5, 'text-anchor': 'middle' }, 'Internet'),
      );
      return g;
    }
  }
}

/** The picture: draws, keeps the user's zoom and pan, highlights a selection and a path. */
export class Topology {
  constructor(svgElement, onSelect) {
    this.svg = svgElement;
    this.onSelect = onSelect;
    this.scene = null;
    this.view = null;
    this.userMoved = false;
    this.selected = null;
    this.path = null;
    this.listen();
  }

  /** Redraws from `live` (a Live of the tenant collections). */
  render(live) {
    this.scene = layout(live);
    const { nodes, links, sgLinks, boxes } = this.scene;
    const frames = svg('g', { class: 'layer-frames' });
    const lines = svg('g', { class: 'layer-links' });
    this.sgLayer = svg('g', { class: 'layer-sg' });
    const items = svg('g', { class: 'layer-nodes' });
    this.pathLayer = svg('g', { class: 'layer-path' });
    for (const b of boxes) {
      frames.append(svg('g', { class: 'node vn orphan', transform: `translate(${b.x},${b.y})` },
        svg('rect', { class: 'frame', width: b.w, height: b.h, rx: 14 }),
        svg('text', { class: 'title', x: 16, y: 24 }, b.title)));
    }
    for (const [id, n] of nodes) {
      (n.shape === 'vn' || n.shape === 'subnet' ? frames : items).append(drawNode(id, n));
    }
    for (const l of links) {
      const a = nodes.get(l.from);
      const b = nodes.get(l.to);
      const attrs = { class: `link ${l.kind}`, d: curve(a, b) };
      if (l.obj) {
        const state = shortState(l.obj);
        attrs.class += ` st-${stateClass(state)}`;
        attrs['data-id'] = l.obj.id;
        attrs['data-kind'] = KIND_OF[l.kind === 'nat' ? 'nat_gateways' : 'external_ip_attachments'];
        attrs['data-name'] = nameOf(l.obj);
        attrs['data-state'] = state;
      }
      lines.append(svg('path', attrs, l.obj ? svg('title', {}, `${attrs['data-kind']} ${nameOf(l.obj)} · ${shortState(l.obj)}`) : null));
    }
    this.svg.replaceChildren(
      svg('defs', {},
        svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerUnits: 'userSpaceOnUse', markerWidth: 14, markerHeight: 14, orient: 'auto-start-reverse' },
          svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' }))),
      frames, lines, this.sgLayer, items, this.pathLayer,
    );
    if (!this.view || !this.userMoved) this.fit();
    else this.applyView();
    this.drawSecurityLinks();
    this.highlight();
    this.svg.setAttribute('data-drawn', String(nodes.size));
  }

  /** Security-group links: all when few, else those of the selected object. */
  drawSecurityLinks() {
    const { nodes, sgLinks } = this.scene;
    const shown = sgLinks.length <= MAX_SG_LINKS
      ? sgLinks
      : sgLinks.filter((l) => l.from === this.selected || l.to === this.selected);
    this.sgLayer.replaceChildren(...shown.map((l) => {
      const a = center(nodes.get(l.from));
      const b = center(nodes.get(l.to));
      const hot = l.from === this.selected || l.to === this.selected;
      return svg('line', { class: `link sg${hot ? ' hot' : ''}`, x1: a.x, y1: a.y, x2: b.x, y2: b.y });
    }));
  }

  select(id) {
    this.selected = id;
    if (this.scene) {
      this.drawSecurityLinks();
      this.highlight();
    }
  }

  /** Shows the path of an explanation: `{ids: [...], deciding, verdict}`, or null. */
  showPath(path) {
    this.path = path;
    if (this.scene) this.highlight();
  }

  highlight() {
    for (const node of this.svg.querySelectorAll('.selected, .hop, .deciding')) {
      node.classList.remove('selected', 'hop', 'deciding');
    }
    const mark = (id, cls) => {
      for (const node of this.svg.querySelectorAll(`[data-id="${CSS.escape(id)}"]`)) node.classList.add(cls);
    };
    if (this.selected) mark(this.selected, 'selected');
    this.pathLayer.replaceChildren();
    if (!this.path) return;
    const points = [];
    for (const id of this.path.ids) {
      mark(id, 'hop');
      const n = this.scene.nodes.get(id);
      if (!n) continue;
      // Frames: their state dot; the internet: the middle of its lower edge, below its label.
      let c = center(n);
      if (n.shape === 'vn' || n.shape === 'subnet') c = { x: n.x + 16, y: n.y + 17 };
      else if (n.shape === 'internet') c = { x: c.x, y: n.y + n.h };
      const last = points[points.length - 1];
      if (!last || last.x !== c.x || last.y !== c.y) points.push(c);
    }
    if (this.path.deciding) mark(this.path.deciding, 'deciding');
    if (points.length > 1) {
      this.pathLayer.append(svg('polyline', {
        class: `path ${this.path.verdict}`,
        points: points.map((p) => `${p.x},${p.y}`).join(' '),
        'marker-end': 'url(#arrow)',
      }));
    }
    for (const p of points) this.pathLayer.append(svg('circle', { class: `path-stop ${this.path.verdict}`, cx: p.x, cy: p.y, r: 6 }));
  }

  fit() {
    if (!this.scene) return;
    // Everything in view, never enlarged beyond its natural size.
    const w = Math.max(this.scene.width, this.svg.clientWidth || 0);
    const h = Math.max(this.scene.height, this.svg.clientHeight || 0);
    this.view = { x: -(w - this.scene.width) / 2, y: 0, w, h };
    this.userMoved = false;
    this.applyView();
  }

  applyView() {
    const v = this.view;
    this.svg.setAttribute('viewBox', `${v.x} ${v.y} ${v.w} ${v.h}`);
  }

  listen() {
    let drag = null;
    this.svg.addEventListener('pointerdown', (e) => {
      drag = { x: e.clientX, y: e.clientY, view: Object.assign({}, this.view), moved: false };
    });
    this.svg.addEventListener('pointermove', (e) => {
      if (!drag || !this.view) return;
      const dx = e.clientX - drag.x;
      const dy = e.clientY - drag.y;
      if (!drag.moved && Math.hypot(dx, dy) < 4) return;
      if (!drag.moved) this.svg.setPointerCapture(e.pointerId);
      drag.moved = true;
      const scale = this.view.w / this.svg.clientWidth;
      this.view = Object.assign({}, drag.view, { x: drag.view.x - dx * scale, y: drag.view.y - dy * scale });
      this.userMoved = true;
      this.applyView();
    });
    this.svg.addEventListener('pointerup', (e) => {
      const moved = drag && drag.moved;
      drag = null;
      if (moved) return;
      const target = e.target.closest('[data-id]');
      const id = target && target.getAttribute('data-id');
      if (id && id !== 'internet') this.onSelect(id);
    });
    this.svg.addEventListener('keydown', (e) => {
      if (e.key !== 'Enter' && e.key !== ' ') return;
      const target = e.target.closest && e.target.closest('[data-id]');
      const id = target && target.getAttribute('data-id');
      if (!id || id === 'internet') return;
      e.preventDefault();
      this.onSelect(id);
    });
    this.svg.addEventListener('wheel', (e) => {
      if (!this.view) return;
      e.preventDefault();
      const rect = this.svg.getBoundingClientRect();
      const factor = Math.exp(e.deltaY * 0.0015);
      const scale = Math.max(this.view.w / rect.width, this.view.h / rect.height);
      // The point under the pointer stays where it is.
      const px = this.view.x + (e.clientX - rect.left) * scale;
      const py = this.view.y + (e.clientY - rect.top) * scale;
      this.view = {
        x: px - (px - this.view.x) * factor,
        y: py - (py - this.view.y) * factor,
        w: this.view.w * factor,
        h: this.view.h * factor,
      };
      this.userMoved = true;
      this.applyView();
    }, { passive: false });
  }
}
