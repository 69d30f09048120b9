// Status: one dense table of every frontend, backend and server, modelled
// on HAProxy's stats page. Each row says the object's health and its admin
// state (two facts, two columns), its sessions now / peak / limit, its
// rates and their peaks, bytes, errors by kind, its last health check and
// its response time. Search filters the rows; CSV exports the rows shown;
// operators and admins select servers and drain, maint or ready them at
// once. It reads GET /api/v1/stats every 2 s (the full document: the stats
// events carry no peaks nor limits).

import { h, badge, num, bytes, toast, confirmBox, ago, tip } from '../dom.js';
import { get, request, enc } from '../api.js';
import { problemText } from '../common.js';
import { leavesNoUsable } from './backends.js';

const POLL_MS = 2000;

// COLS are the columns after the selection box: key (the CSV header and
// the cell's data-col), heading, tooltip, value of a row, and whether it
// is an error count (red when not zero).
const COLS = [
  ['name', 'Name', 'Frontend, backend, or backend/server', (r) => r.label],
  ['type', 'Type', 'FRONTEND, BACKEND or server', (r) => r.type],
  ['health', 'Health', 'Observed health: up or down by the health check ("no check" when the backend has none); a frontend is open', (r) => r.health],
  ['admin', 'Admin', 'Admin state of a server: ready, drain or maint', (r) => r.admin],
  ['conn_cur', 'Cur', 'Sessions now (connections alive; backend, server: slots held)', (r) => r.c.conn_cur],
  ['conn_max', 'Max', 'Most sessions at once since start', (r) => r.c.conn_max],
  ['limit', 'Limit', 'maxconn (— none)', (r) => r.limit || null],
  ['conn_rate', 'Conn/s', 'Connections over the last second', (r) => round(r.c.conn_rate)],
  ['conn_rate_max', 'Max/s', 'Most connections in one second', (r) => r.c.conn_rate_max],
  ['req_rate', 'Req/s', 'HTTP requests over the last second', (r) => round(r.c.req_rate)],
  ['req_rate_max', 'Max/s', 'Most HTTP requests in one second', (r) => r.c.req_rate_max],
  ['conn_total', 'Total', 'Connections (backend, server: slots taken)', (r) => r.c.conn_total],
  ['requests', 'Reqs', 'HTTP requests', (r) => r.c.requests],
  ['bytes_in', 'In', 'Bytes client → server', (r) => r.c.bytes_in, 'bytes'],
  ['bytes_out', 'Out', 'Bytes server → client', (r) => r.c.bytes_out, 'bytes'],
  ['denied', 'Denied', 'Refused by a rule or a limit', (r) => r.c.denied, 'err'],
  ['errors', 'Err req', 'Malformed requests', (r) => r.c.errors, 'err'],
  ['connect_errors', 'Err conn', 'Failed connect attempts', (r) => r.c.connect_errors, 'err'],
  ['response_errors', 'Err resp', 'Responses a server spoiled: bad, cut, or none within server_ms', (r) => r.c.response_errors, 'err'],
  ['retries', 'Retries', 'Connect attempts after the first', (r) => r.c.retries, 'err'],
  ['s5xx', '5xx', 'Responses 5xx (those spliced made for a server included)', (r) => (r.c.status || {})['5xx'], 'err'],
  ['queue', 'Queue', 'Waiting for a server slot', (r) => r.c.queue, 'err'],
  ['check', 'Check', 'Last health check: status, code, duration', (r) => r.check],
  ['rtime_ms', 'Resp ms', 'Mean time from a request sent to its response head', (r) => (r.c.response_time_avg_us ? Math.round(r.c.response_time_avg_us / 10) / 100 : null)],
  ['weight', 'Weight', 'Server weight', (r) => r.weight],
];

function round(v) { return typeof v === 'number' ? Math.round(v * 10) / 10 : null; }

// checkLine is a server's last check as HAProxy's LastChk: "L7OK/200 in 2 ms".
function checkLine(ck) {
  if (!ck) return null;
  let s = ck.status || '';
  if (ck.code) s += '/' + ck.code;
  if (typeof ck.duration_ms === 'number' && ck.checked_at) s += ` in ${Math.round(ck.duration_ms * 10) / 10} ms`;
  return s;
}

// rowsOf flattens a stats document: frontends, then each backend followed
// by its servers.
function rowsOf(doc) {
  const out = [];
  for (const f of doc.frontends || []) {
    out.push({ id: `fe/${f.name}`, kind: 'frontend', label: f.name, type: 'FRONTEND', health: 'open', admin: null, limit: f.maxconn, c: f, search: f.name });
  }
  for (const b of doc.backends || []) {
    out.push({ id: `be/${b.name}`, kind: 'backend', label: b.name, type: 'BACKEND', health: b.state === 'down' ? 'DOWN' : 'UP', admin: null, limit: 0, c: b, search: b.name, backend: b.name });
    for (const s of b.servers || []) {
      const health = !s.check && s.up ? 'no check' : (s.up ? 'up' : 'down');
      out.push({
        id: `srv/${b.name}/${s.name}`, kind: 'server', label: `${b.name}/${s.name}`, type: 'server', health, admin: s.admin_state,
        limit: s.maxconn, c: s, check: checkLine(s.check), checkInfo: s.check, weight: s.weight,
        search: `${b.name}/${s.name} ${s.address || ''}`, backend: b.name, server: s.name,
      });
    }
  }
  return out;
}

const healthKind = { up: 'ok', UP: 'ok', open: 'ok', down: 'bad', DOWN: 'bad', 'no check': '' };
const adminKind = { ready: 'ok', drain: 'warn', maint: 'bad' };

function fmt(kind, v) {
  if (kind === 'bytes') return bytes(v ?? null);
  if (typeof v === 'number') return num(v);
  return v === null || v === undefined || v === '' ? '—' : String(v);
}

// csvField quotes a field when it needs it (RFC 4180).
function csvField(v) {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

export function toCSV(rows) {
  const lines = [COLS.map(([k]) => k).join(',')];
  for (const r of rows) lines.push(COLS.map(([, , , val]) => csvField(val(r))).join(','));
  return lines.join('\r\n') + '\r\n';
}

export default async function status(ctx, root) {
  const canServer = ctx.can('server');
  let doc = await get('/api/v1/stats');
  let rows = rowsOf(doc);
  const selected = new Set(); // server row ids
  let query = '';
  let shape = ''; // the row ids drawn, joined: a change redraws the body
  let cells = new Map(); // row id -> {tr, tds: [td per column], box}

  const search = h('input', { type: 'search', id: 'status-search', placeholder: 'Search name or address', 'aria-label': 'Search frontends, backends and servers' });
  const count = h('span', { id: 'status-count', class: 'muted', 'aria-live': 'polite' });
  const selInfo = h('span', { id: 'status-selected', class: 'muted' });
  const bulk = canServer ? [['drain', 'Drain'], ['maint', 'Maint'], ['ready', 'Ready']].map(([st, label]) => h('button', {
    type: 'button', class: 'btn small', 'data-write': '', 'data-bulk': st, disabled: true,
    onclick: (e) => bulkSet(st, e.currentTarget),
  }, label)) : [];
  const allBox = canServer ? h('input', { type: 'checkbox', id: 'status-all', 'aria-label': 'Select every server shown' }) : null;
  const csvBtn = h('button', { type: 'button', class: 'btn small', id: 'status-csv', onclick: exportCSV }, 'Export CSV');
  const note = h('p', { class: 'notice warn', id: 'status-error', role: 'alert', hidden: true });
  const exported = h('span', { id: 'status-exported', class: 'muted', 'aria-live': 'polite' });
  const tbody = h('tbody');
  const table = h('table', { class: 'status-table', id: 'status-table' },
    h('thead', null, h('tr', null,
      canServer ? h('th', null, allBox) : null,
      COLS.map(([k, head, why, , kind]) => h('th', { 'data-col': k, class: kind === 'err' || (k !== 'name' && k !== 'type' && k !== 'health' && k !== 'admin' && k !== 'check') ? 'num' : '' }, tip(head, why))))),
    tbody);

  root.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Status'),
      h('div', { class: 'actions' }, exported, csvBtn)),
    h('div', { class: 'panel' },
      h('div', { class: 'toolbar status-toolbar' }, search, count,
        canServer ? h('span', { class: 'status-bulk', role: 'group', 'aria-label': 'Admin state of the selected servers' }, selInfo, ...bulk) : null),
      note,
      h('div', { class: 'tablewrap status-wrap' }, table),
      h('p', { class: 'hint' }, 'Health and admin state are two facts: a drained server that its check sees down is "down" and "drain". ',
        'Peaks (Max) count since start; rates are per second. Hover, focus or tap a heading for what it counts.')));

  function shown(r) {
    if (!query) return true;
    const q = query.toLowerCase();
    if (r.search.toLowerCase().includes(q)) return true;
    // A backend shows with a matching server, a server with its matching backend.
    if (r.kind === 'backend') return rows.some((x) => x.kind === 'server' && x.backend === r.backend && x.search.toLowerCase().includes(q));
    if (r.kind === 'server') return r.backend.toLowerCase().includes(q);
    return false;
  }

  function drawBody() {
    const visible = rows.filter(shown);
    shape = visible.map((r) => r.id).join('\n');
    cells = new Map();
    tbody.replaceChildren(...visible.map((r) => {
      let box = null;
      if (canServer) {
        box = r.kind === 'server' ? h('input', {
          type: 'checkbox', 'aria-label': `Select ${r.label}`, 'data-select': r.id,
          onchange: (e) => { if (e.target.checked) selected.add(r.id); else selected.delete(r.id); syncBulk(); },
        }) : null;
        if (box) box.checked = selected.has(r.id);
      }
      const tds = COLS.map(([k, , , , kind]) => h('td', { 'data-col': k, title: k === 'name' ? r.label : null, class: (kind === 'err' || kind === 'bytes' || typeof r.c[k] === 'number' || ['limit', 'rtime_ms', 'weight', 's5xx'].includes(k)) ? 'num' : '' }));
      const tr = h('tr', { 'data-row': r.id, class: 'row-' + r.kind }, canServer ? h('td', null, box) : null, tds);
      cells.set(r.id, { tr, tds });
      return tr;
    }));
    paintCells(visible);
    count.textContent = `${visible.length} of ${rows.length} rows`;
    syncBulk();
  }

  function paintCells(visible) {
    for (const r of visible) {
      const c = cells.get(r.id);
      if (!c) continue;
      COLS.forEach(([k, , , val, kind], i) => {
        const td = c.tds[i];
        const v = val(r);
        if (k === 'health' || k === 'admin') {
          const text = v === null || v === undefined ? '—' : v;
          if (td.textContent !== text) td.replaceChildren(v ? badge(text, (k === 'health' ? healthKind : adminKind)[v] || '') : text);
          return;
        }
        const text = fmt(kind, v);
        if (td.textContent !== text) td.textContent = text;
        if (kind === 'err') td.classList.toggle('bad-v', typeof v === 'number' && v > 0);
        if (k === 'check' && r.checkInfo) {
          td.title = `${r.checkInfo.reason || ''}${r.checkInfo.since ? ` · since ${ago(r.checkInfo.since)}` : ''}`;
          td.classList.toggle('bad-v', !/OK$/.test(r.checkInfo.status || ''));
        }
      });
      c.tr.classList.toggle('down', r.health === 'down' || r.health === 'DOWN');
    }
  }

  function syncBulk() {
    // A selected server that is gone, or hidden by the search, is not acted on.
    const visibleSel = [...selected].filter((id) => cells.has(id));
    selInfo.textContent = visibleSel.length ? `${visibleSel.length} selected` : 'Select servers to change their state';
    for (const b of bulk) b.disabled = !visibleSel.length;
    if (allBox) {
      const boxes = [...cells.keys()].filter((id) => id.startsWith('srv/'));
      allBox.checked = boxes.length > 0 && boxes.every((id) => selected.has(id));
    }
  }

  async function bulkSet(st, button) {
    const targets = rows.filter((r) => r.kind === 'server' && selected.has(r.id) && cells.has(r.id));
    if (!targets.length) return;
    // The backends this leaves with no usable server (as the Backends
    // page asks for its last usable server): their clients get 503.
    const emptied = st === 'ready' ? [] : (doc.backends || []).filter((b) => leavesNoUsable(
      (b.servers || []).map((x) => ({ name: x.name, admin: x.admin_state, up: x.up })),
      targets.filter((r) => r.backend === b.name).map((r) => r.server))).map((b) => b.name);
    if (st !== 'ready' && !await confirmBox(`${st === 'drain' ? 'Drain' : 'Put in maintenance'} ${targets.length} server${targets.length > 1 ? 's' : ''}?`,
      h('div', null, h('p', null, targets.map((r) => r.label).join(', ')),
        h('p', null, st === 'drain' ? 'They take no new connection; live ones finish.' : 'They take no connection at all.'),
        emptied.length ? h('p', { 'data-emptied': emptied.join(' ') }, h('b', null, `${emptied.join(', ')} will have no usable server left: ${emptied.length > 1 ? 'their' : 'its'} clients will get 503 Service Unavailable`),
          ' until a server is ready (and up) again.') : null),
      { ok: st === 'drain' ? 'Drain' : 'Put in maintenance', danger: true })) { button.focus(); return; }
    button.disabled = true;
    let ok = 0; const failed = [];
    for (const r of targets) {
      try {
        await ctx.writing(() => request('PATCH', `/api/v1/backends/${enc(r.backend)}/servers/${enc(r.server)}`, { admin_state: st }));
        ok++;
      } catch (e) {
        failed.push(`${r.label}: ${problemText(e)}`);
      }
    }
    if (failed.length) toast(`${ok} set to ${st}; refused: ${failed.join('; ')}`, 'bad');
    else toast(`${ok} server${ok > 1 ? 's' : ''} set to ${st}`);
    await poll();
    syncBulk();
  }

  function exportCSV() {
    const csv = toCSV(rows.filter(shown));
    const url = URL.createObjectURL(new Blob([csv], { type: 'text/csv' }));
    const name = `spliced-status-${new Date().toISOString().replace(/[:.]/g, '-')}.csv`;
    const a = h('a', { href: url, download: name, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    exported.textContent = `Exported ${csv.split('\r\n').length - 2} rows as ${name}`;
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  search.addEventListener('input', () => { query = search.value.trim(); drawBody(); });
  if (allBox) {
    allBox.addEventListener('change', () => {
      for (const id of cells.keys()) {
        if (!id.startsWith('srv/')) continue;
        if (allBox.checked) selected.add(id); else selected.delete(id);
      }
      for (const el of tbody.querySelectorAll('[data-select]')) el.checked = selected.has(el.dataset.select);
      syncBulk();
    });
  }

  let stopped = false;
  async function poll() {
    try {
      doc = await get('/api/v1/stats');
    } catch (e) {
      note.hidden = false;
      note.textContent = `Could not read the statistics: ${problemText(e)}`;
      return;
    }
    if (stopped) return;
    note.hidden = true;
    rows = rowsOf(doc);
    for (const id of [...selected]) if (!rows.some((r) => r.id === id)) selected.delete(id);
    const visible = rows.filter(shown);
    if (visible.map((r) => r.id).join('\n') !== shape) drawBody();
    else { paintCells(visible); count.textContent = `${visible.length} of ${rows.length} rows`; }
    table.dataset.polled = String((Number(table.dataset.polled) || 0) + 1);
  }

  drawBody();
  table.dataset.polled = '1';
  const timer = setInterval(poll, POLL_MS);
  return () => { stopped = true; clearInterval(timer); };
}
