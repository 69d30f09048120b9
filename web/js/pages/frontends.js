// Frontends with their binds and routes.

import { h, clear, badge, modal, num, toast } from '../dom.js';
import { get, enc } from '../api.js';
import { input, group, rows, formShell, multiSelect, listInput, textArea, getAt, setAt } from '../forms.js';
import { write, act, cell, statKey, paint, subscribe, problemText } from '../common.js';
import { previewPlan, labelled, openForm } from './backends.js';
import { loadForEdit, guardedWrite, confirmDelete } from '../conflict.js';
import { limitsPanel, limitsField } from './limits.js';

export default async function frontends(ctx, root) {
  const [list, bks, certs] = await Promise.all([get('/api/v1/frontends'), get('/api/v1/backends'), get('/api/v1/certificates')]);
  const backendNames = bks.map((b) => b.name);
  const certNames = certs.map((c) => c.name);
  const canAdmin = ctx.can('admin');

  root.append(h('div', { class: 'page-head' },
    h('h1', null, 'Frontends'),
    h('div', { class: 'actions' },
      canAdmin ? h('button', { type: 'button', class: 'btn primary', id: 'new-frontend', 'data-write': '', onclick: () => openForm(ctx, async () => frontendForm(ctx, null, bks, await freshCerts(certNames))) }, 'New frontend') : null)));

  if (!list.length) {
    root.append(h('div', { class: 'panel' }, h('p', { class: 'empty' }, 'No frontend yet.',
      canAdmin && !backendNames.length ? ' Create a backend first, then a frontend that sends to it.' : '')));
  }

  for (const f of list) {
    const del = async (e) => {
      if (await confirmDelete(ctx, e.target, `/api/v1/frontends/${enc(f.name)}`, `Delete frontend ${f.name}?`,
        h('p', null, 'Its binds close at once; live connections continue.'),
        { verb: 'Delete', done: `Deleted frontend ${f.name}`, object: `Frontend ${f.name}` })) ctx.refresh();
    };
    root.append(h('section', { class: 'panel', data: { frontend: f.name }, 'aria-label': `Frontend ${f.name}` },
      h('div', { class: 'obj-head' },
        h('h2', null, f.name), badge(f.mode), badge(`splice ${f.splice}`, f.splice === 'off' ? '' : 'accent'),
        h('span', { class: 'muted' }, '→ ', f.default_backend ? h('a', { href: '#/backends' }, f.default_backend) : 'no default backend'),
        canAdmin ? h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'btn small', 'data-write': '', 'data-action': 'add-bind', 'aria-label': `Add a bind to frontend ${f.name}`, onclick: () => openForm(ctx, async () => bindForm(ctx, f, await freshCerts(certNames))) }, 'Add bind'),
          h('button', { type: 'button', class: 'btn small', 'data-write': '', 'data-action': 'edit-frontend', 'aria-label': `Edit frontend ${f.name}`, onclick: () => openForm(ctx, async () => frontendForm(ctx, f, bks, await freshCerts(certNames))) }, 'Edit'),
          h('button', { type: 'button', class: 'btn small danger', 'data-write': '', 'data-action': 'delete-frontend', 'aria-label': `Delete frontend ${f.name}`, onclick: del }, 'Delete')) : null),
      h('div', { class: 'kv' },
        h('span', null, 'maxconn ', h('b', null, f.maxconn ? num(f.maxconn) : 'global')),
        h('span', null, 'client timeout ', h('b', null, `${num(f.timeouts.client_ms)} ms`)),
        h('span', null, 'conns now ', cell('b', statKey('fe', f.name, 'connCur'))),
        h('span', null, 'total ', cell('b', statKey('fe', f.name, 'connTotal'))),
        h('span', null, 'in ', cell('b', statKey('fe', f.name, 'bytesIn'), 'bytes')),
        h('span', null, 'out ', cell('b', statKey('fe', f.name, 'bytesOut'), 'bytes')),
        h('span', null, 'access log ', h('b', null, f.access_log ? 'on' : 'off')),
        f.timeouts.handshake_ms ? h('span', { 'data-handshake': f.name }, f.binds.some((b) => b.tls) || !f.binds.some((b) => b.accept_proxy) ? 'TLS handshake timeout ' : 'PROXY header timeout ', h('b', null, `${num(f.timeouts.handshake_ms)} ms`)) : null),
      memberLine(f.name, 'hasH2', f.mode === 'http' && (!f.http || !f.http.versions || f.http.versions.includes('2')), `HTTP/2 of ${f.name}`, 'data-h2-counts',
        [['HTTP/2 conns now ', 'h2ConnCur'], ['streams open ', 'h2StreamsCur'], ['total ', 'h2StreamsTotal'], ['refused ', 'h2Refused', 'err'],
          ['resets sent ', 'h2ResetsSent'], ['received ', 'h2ResetsRecv']]),
      memberLine(f.name, 'hasTLS', f.binds.some((b) => b.tls), `TLS handshakes of ${f.name}`, 'data-tls-counts',
        [['TLS handshakes full ', 'tlsFull'], ['resumed ', 'tlsResumed'], ['failed ', 'tlsFailed', 'err'], ['timeouts ', 'tlsTimeouts', 'err']]),
      memberLine(f.name, 'hasProxy', f.binds.some((b) => b.accept_proxy), `PROXY protocol headers of ${f.name}`, 'data-proxy-counts',
        [['PROXY headers accepted ', 'proxyAccepted'], ['refused (untrusted peer) ', 'proxyRefused', 'err'], ['invalid ', 'proxyInvalid', 'err'], ['timeouts ', 'proxyTimeouts', 'err']]),
      f.mode === 'http' ? h('div', { class: 'kv', 'aria-label': `Responses of ${f.name}` },
        h('span', null, 'requests ', cell('b', statKey('fe', f.name, 'requests'))),
        ...['2xx', '3xx', '4xx'].map((c) => h('span', null, `${c} `, cell('b', statKey('fe', f.name, 's' + c)))),
        h('span', null, '5xx ', cell('b', statKey('fe', f.name, 's5xx'), 'err')),
        h('span', null, '5xx/s ', cell('b', statKey('fe', f.name, 'e5'), 'rate-e5')),
        h('span', null, 'bad requests ', cell('b', statKey('fe', f.name, 'errors'), 'err')),
        h('span', { 'data-versions': f.name }, 'versions ', h('b', null, versionsSummary(f.http))),
        h('span', null, 'headers ', h('b', null, httpSummary(f.http)))) : null,
      h('h3', null, 'Binds'),
      f.binds.length ? h('div', { class: 'tablewrap' }, labelled(h('table', { class: 'stack' },
        h('thead', null, h('tr', null, ['Bind', 'Address', 'Port', 'Shards', 'Backlog', 'Threads', 'TLS', ''].map((t, i) => h('th', { class: i >= 2 && i <= 4 ? 'num' : '' }, t)))),
        h('tbody', null, f.binds.map((b) => h('tr', { data: { bind: `${f.name}/${b.name}` } },
          h('td', null, h('b', null, b.name)),
          h('td', { class: 'mono' }, b.address),
          h('td', { class: 'num mono' }, String(b.port)),
          h('td', { class: 'num' }, b.shards ? String(b.shards) : 'distributor'),
          h('td', { class: 'num' }, b.backlog ? String(b.backlog) : 'default'),
          h('td', { class: 'mono' }, b.threads && b.threads.length ? b.threads.join(',') : 'all'),
          h('td', { class: 'tls' }, b.tls ? `${b.tls.certificates.join(', ')} · TLS ${b.tls.min_version}+${b.tls.client_ca ? ' · client certs ' + b.tls.client_auth : ''}` : '—',
            b.accept_proxy ? h('span', { class: 'muted', 'data-proxy': `${f.name}/${b.name}` }, ` · PROXY from ${(b.accept_proxy.trusted || []).join(', ')}`) : null),
          h('td', null, canAdmin ? h('button', {
            type: 'button', class: 'btn small ghost danger', 'data-write': '', 'data-action': 'remove-bind', 'data-bind': `${f.name}/${b.name}`, 'aria-label': `Remove bind ${f.name}/${b.name}`,
            onclick: async (e) => {
              if (await confirmDelete(ctx, e.target, `/api/v1/frontends/${enc(f.name)}/binds/${enc(b.name)}`, `Remove bind ${f.name}/${b.name}?`,
                h('p', null, `Stops listening on ${b.address}:${b.port}.`),
                { verb: 'Remove', done: `Removed bind ${f.name}/${b.name}`, object: `Bind ${f.name}/${b.name}` })) ctx.refresh();
            },
          }, 'Remove') : null))))))) : h('p', { class: 'empty' }, 'No bind: this frontend listens nowhere.'),
      f.mode === 'http' || (f.routes && f.routes.length) ? [
        h('h3', null, 'Routes ', h('span', { class: 'muted' }, '(first match wins)')),
        f.routes.length ? h('div', { class: 'tablewrap' }, h('table', null,
          h('thead', null, h('tr', null, ['#', f.mode === 'tcp' ? 'SNI' : 'Host', 'Path prefix', 'Method', 'Backend'].map((t) => h('th', null, t)))),
          h('tbody', null, f.routes.map((r, i) => h('tr', null,
            h('td', null, String(i + 1)), h('td', { class: 'mono' }, r.sni || r.host || '*'), h('td', { class: 'mono' }, r.path_prefix || '*'),
            h('td', { class: 'mono' }, r.method || '*'), h('td', null, r.backend)))))) : h('p', { class: 'empty' }, 'No route: everything goes to the default backend.'),
      ] : null,
      rulesPanel(f),
      limitsPanel(ctx, f)));
  }
  paint(root, ctx.live);
  // #/frontends/new (the first-visit guide) opens the form at once.
  if (ctx.sub === 'new' && canAdmin) {
    history.replaceState(null, '', '#/frontends');
    openForm(ctx, () => frontendForm(ctx, null, bks, certNames));
  }
  return subscribe(ctx.live, { stats: () => paint(root, ctx.live) });
}

// rulesPanel shows a frontend's rules (request, then response) with each
// rule's hits live, and the frontend's totals (denied, redirected,
// rewritten); nothing for a frontend without rules.
function rulesPanel(f) {
  const r = f.rules || {};
  const phases = ['request', 'response'].filter((ph) => (r[ph] || []).length);
  if (!phases.length) return null;
  const show = (v) => (v === undefined || v === null ? '' : JSON.stringify(v));
  return h('div', { 'data-rules': f.name },
    h('h3', null, 'Rules ', h('span', { class: 'muted' }, '(in order; the first deny or redirect ends the request)')),
    memberLine(f.name, 'hasRules', true, `Rules of ${f.name}`, 'data-rule-counts',
      [['denied ', 'ruleDenied', 'err'], ['redirected ', 'ruleRedirected'], ['rewritten ', 'ruleRewritten']]),
    phases.map((ph) => h('div', { class: 'tablewrap' }, h('table', { 'aria-label': `${ph} rules of ${f.name}` },
      h('thead', null, h('tr', null, ['#', ph === 'request' ? 'Request rule: when' : 'Response rule: when', 'Do', 'Hits'].map((t) => h('th', null, t)))),
      h('tbody', null, r[ph].map((rule, i) => h('tr', { data: { rule: `${f.name}/${ph}/${i}` } },
        h('td', null, String(i)),
        h('td', { class: 'mono' }, rule.when ? show(rule.when) : 'always'),
        h('td', { class: 'mono' }, show(rule.do)),
        h('td', { class: 'num' }, cell('b', statKey('fe', f.name, `rule-${ph}-${i}`))))))))));
}

// rulesField edits a frontend's rules as JSON ({"request": [...],
// "response": [...]}): text that does not parse is shown as such and
// sent as text, which the API refuses with a problem on /rules; the
// API's problems on /rules/... land on this field.
function rulesField(model) {
  const text = model.rules ? JSON.stringify(model.rules, null, 2) : '';
  const wrap = textArea({ rules: text }, ['rules'], 'Rules (JSON)', {
    rows: 8, hint: 'request rules run before routes (README, "Rules")',
    placeholder: '{"request": [{"when": {"src": ["10.0.0.0/8"]}, "do": {"deny": {}}}], "response": []}',
  });
  const el = wrap.querySelector('textarea');
  el.classList.add('mono');
  const err = wrap.querySelector('.err');
  el.addEventListener('input', () => {
    const v = el.value.trim();
    err.textContent = '';
    wrap.classList.remove('invalid');
    el.removeAttribute('aria-invalid');
    if (v === '') { delete model.rules; return; }
    try {
      model.rules = JSON.parse(v);
    } catch (e) {
      model.rules = v; // refused by the API, with a problem on /rules
      err.textContent = `not JSON: ${e.message}`;
      wrap.classList.add('invalid');
      el.setAttribute('aria-invalid', 'true');
    }
  });
  return wrap;
}

// memberLine is the line of one optional member of a frontend's stats
// (h2, tls, proxy): its counters, live, each [label, field, fmt]. It shows
// when the configuration says the frontend has the member (shown), or
// when its stats have it (has: a frontend that had a TLS bind keeps its
// handshake counts); attr names it for tests.
function memberLine(name, has, shown, label, attr, fields) {
  return h('div', { class: 'kv', 'aria-label': label, [attr]: name, hidden: !shown, data: { present: statKey('fe', name, has) } },
    fields.map(([text, field, fmt]) => h('span', null, text, cell('b', statKey('fe', name, field), fmt || 'num'))));
}

// HANDSHAKE_DEFAULT_MS is the handshake_ms the API gives a frontend with a
// TLS bind (or SNI routes) that has none (core/config DefaultHandshakeMs).
const HANDSHAKE_DEFAULT_MS = 5000;

// handshakeNote says, in a bind's TLS section, how long its handshakes
// may take: the frontend's timeouts.handshake_ms, which the API sets to
// 5000 ms with the first TLS bind when it is not set (never silently).
function handshakeNote(handshakeMs) {
  const ms = handshakeMs();
  return h('p', { class: 'hint tls-handshake', 'data-handshake-note': '' }, ms
    ? `Handshake timeout: ${num(ms)} ms (the frontend's timeouts.handshake_ms): a client that has not finished its TLS handshake by then is closed.`
    : `Handshake timeout: the frontend has none, so the API sets its timeouts.handshake_ms to ${num(HANDSHAKE_DEFAULT_MS)} ms with this bind: a client that has not finished its TLS handshake by then is closed. Change it in the frontend's Timeouts.`);
}

// freshCerts reads the certificates' names again into names (the array
// the forms hold) and returns it.
async function freshCerts(names) {
  const list = await get('/api/v1/certificates');
  names.splice(0, names.length, ...list.map((c) => c.name));
  return names;
}

// HTTP_DEFAULTS are the http options the API gives a frontend sent
// without them (core/config defaults.go), each member on its own (a
// missing x_forwarded_for is true even when the object has other
// members): X-Forwarded-For on, the rest off.
const HTTP_DEFAULTS = { x_forwarded_for: true, x_forwarded_proto: false, via: false };

// httpSummary says what an http frontend adds to requests.
function httpSummary(o) {
  const on = [];
  if (o && o.x_forwarded_for) on.push('X-Forwarded-For');
  if (o && o.x_forwarded_proto) on.push('X-Forwarded-Proto');
  if (o && o.via) on.push('Via');
  return (on.join(', ') || 'none added') + (o && o.max_body_size ? ` · body ≤ ${num(o.max_body_size)} B` : '');
}

// HTTP_VERSIONS are the versions a frontend may speak, as http.versions
// names them, with their labels; H2_DEFAULTS the http.h2 values the API
// fills when a member is missing (core/config defaults.go), shown as
// placeholders.
const HTTP_VERSIONS = [['1.1', 'HTTP/1.1'], ['2', 'HTTP/2']];
const H2_DEFAULTS = { max_concurrent_streams: 100, initial_window_size: 65535, max_frame_size: 16384, max_header_list_size: 16384 };

// versionsSummary names the HTTP versions of an http frontend.
function versionsSummary(o) {
  const v = (o && o.versions) || HTTP_VERSIONS.map(([x]) => x);
  return v.map((x) => (HTTP_VERSIONS.find(([y]) => y === x) || [x, x])[1]).join(', ') || 'none';
}

let versionsFieldSeq = 0; // ids of the versions fields' error boxes

// versionsField edits http.versions as one checkbox per version; the
// list is sent in the API's order ("1.1", "2"), and none ticked is sent
// as [] for the API to refuse at /http/versions (shown here).
function versionsField(model) {
  const path = ['http', 'versions'];
  const cur = getAt(model, path) || HTTP_VERSIONS.map(([v]) => v);
  setAt(model, path, [...cur]);
  const boxes = HTTP_VERSIONS.map(([v, label]) => {
    const box = h('input', {
      type: 'checkbox', checked: cur.includes(v), 'data-version': v, 'aria-label': label,
      onchange: () => setAt(model, path, HTTP_VERSIONS.map(([x]) => x).filter((x) => boxes.find((b) => b.dataset.version === x).checked)),
    });
    return box;
  });
  const errId = `versions-err-${++versionsFieldSeq}`;
  boxes.forEach((b) => b.setAttribute('aria-describedby', errId));
  return h('div', { class: 'field', data: { ptr: '/http/versions' }, role: 'group', 'aria-label': 'HTTP versions' },
    h('label', null, 'HTTP versions'),
    h('div', { class: 'checks' }, boxes.map((b, i) => h('label', { class: 'check' }, b, ' ', HTTP_VERSIONS[i][1]))),
    h('div', { class: 'hint' }, 'HTTP/2: h2 by ALPN on TLS binds, h2c on clear ones'),
    h('div', { class: 'err', id: errId }));
}

// h2Fields edits http.h2; an empty input leaves the member out (the
// API's default, shown as the placeholder).
function h2Fields(model) {
  const p = ['http', 'h2'];
  return group(p, 'HTTP/2 settings (empty = default)', h('div', { class: 'fields' },
    input(model, [...p, 'max_concurrent_streams'], 'Max concurrent streams', 'int',
      { min: 1, max: 1000, placeholder: String(H2_DEFAULTS.max_concurrent_streams), hint: 'per connection; each holds a server connection' }),
    input(model, [...p, 'initial_window_size'], 'Initial window size (bytes)', 'int',
      { min: 1024, max: 2147483647, placeholder: String(H2_DEFAULTS.initial_window_size), hint: 'request body a stream sends ahead' }),
    input(model, [...p, 'max_frame_size'], 'Max frame size (bytes)', 'int',
      { min: 16384, max: 16777215, placeholder: String(H2_DEFAULTS.max_frame_size) }),
    input(model, [...p, 'max_header_list_size'], 'Max header list size (bytes)', 'int',
      { min: 1024, max: 1048576, placeholder: String(H2_DEFAULTS.max_header_list_size), hint: 'larger header lists get 431' })));
}

function bindFields(model, base, certNames, mode, handshakeMs) {
  return [
    input(model, [...base, 'name'], 'Name', 'text', { required: true, placeholder: 'b1' }),
    input(model, [...base, 'address'], 'Address', 'text', { required: true, placeholder: '0.0.0.0' }),
    input(model, [...base, 'port'], 'Port', 'int', { min: 1, max: 65535, placeholder: '80' }),
    input(model, [...base, 'shards'], 'Shards', 'int', { min: 0, placeholder: '0' }),
    input(model, [...base, 'backlog'], 'Backlog', 'int', { min: 0, placeholder: 'default' }),
    intList(model, [...base, 'threads'], 'Threads', { placeholder: 'all', hint: 'loops that accept on it: 0, 1, …' }),
    proxyFields(model, base, handshakeMs),
    tlsFields(model, base, certNames, mode, handshakeMs),
  ];
}

// proxyFields edits the accept_proxy member of the bind at base: the
// checkbox adds it (the load balancers trusted to send a PROXY header,
// to be filled in: the API refuses an empty list, next to the field) or
// removes it.
function proxyFields(model, base, handshakeMs) {
  const path = [...base, 'accept_proxy'];
  const box = h('div', { class: 'fields' });
  const render = () => {
    clear(box);
    if (!getAt(model, path)) return;
    const ms = handshakeMs();
    box.append(
      listInput(model, [...path, 'trusted'], 'Trusted peers', {
        placeholder: '10.0.0.0/8, 192.0.2.7',
        hint: 'CIDR prefixes or addresses of the load balancers; a connection from any other peer is closed',
      }),
      h('p', { class: 'hint', 'data-proxy-note': '' }, `The header must arrive within ${num(ms || HANDSHAKE_DEFAULT_MS)} ms (the frontend's timeouts.handshake_ms${ms ? '' : ', set to that default with this bind'}); the client it names replaces the peer in X-Forwarded-For and the access log.`));
  };
  const on = h('input', {
    type: 'checkbox', checked: !!getAt(model, path), 'aria-label': 'Read a PROXY protocol header on this bind',
    onchange: () => { setAt(model, path, on.checked ? { trusted: [] } : undefined); render(); },
  });
  render();
  return group(path, 'PROXY protocol', h('label', { class: 'check' }, on, ' read the client\'s address from a PROXY header (v1 or v2)'), box);
}

// intList edits an array of integers as one text input ("0, 2"); a word
// that is not a number is sent as is, for the API to name it.
function intList(model, path, label, opts) {
  const f = listInput(model, path, label, opts);
  const el = f.querySelector('input');
  el.addEventListener('input', () => {
    const v = getAt(model, path);
    if (v) setAt(model, path, v.map((x) => (/^\d+$/.test(x) ? Number(x) : x)));
  });
  return f;
}

// loopbackAdmin: the page itself is served on a loopback address, so a
// new bind defaults to one too (nothing exposed by surprise).
export function defaultBindAddress() {
  const host = location.hostname.replace(/^\[|\]$/g, '');
  return /^(127\.|localhost$|::1$)/.test(host) ? '127.0.0.1' : '0.0.0.0';
}

// tlsFields edits the tls member of the bind at base: the checkbox adds
// it (certificates to choose) or removes it. Members the form does not
// show (ciphers, client_cert_header_prefix) are kept as GET returned them.
function tlsFields(model, base, certNames, mode, handshakeMs) {
  const path = [...base, 'tls'];
  const box = h('div', { class: 'fields' });
  // The certificates are read again when the form opens and with this
  // button, so one uploaded meanwhile (Certificates page, another tab) can
  // be chosen without leaving the form; the choices made are kept.
  const reload = h('button', {
    type: 'button', class: 'btn small', 'data-action': 'reload-certs',
    onclick: async () => {
      reload.disabled = true;
      try { await freshCerts(certNames); render(); } catch (e) { toast(problemText(e), 'bad'); } finally { reload.disabled = false; }
      const sel = box.querySelector('[data-ptr$="/certificates"] select');
      if (sel) sel.focus();
    },
  }, 'Reload the list');
  const render = () => {
    clear(box);
    if (!getAt(model, path)) return;
    box.append(
      multiSelect(model, [...path, 'certificates'], 'Certificates', certNames,
        { hint: [certNames.length ? 'SNI picks among them; else the first. ' : 'None uploaded yet. ',
          h('a', { href: '#/certificates', target: '_blank', rel: 'noopener' }, 'Upload one'), ' (new tab), then ', reload] }),
      input(model, [...path, 'min_version'], 'Min version', 'select', { options: ['1.2', '1.3', '1.1', '1.0'], default: '1.2' }),
      listInput(model, [...path, 'alpn'], 'ALPN', mode === 'http'
        ? { placeholder: 'from the HTTP versions', hint: 'comma-separated; empty: h2, http/1.1 as the frontend\'s versions say' }
        : { placeholder: 'none', hint: 'comma-separated' }),
      input(model, [...path, 'client_auth'], 'Client certificates', 'select',
        { options: [['', 'default (required with a CA)'], 'required', 'optional'], optional: true }),
      textArea(model, [...path, 'client_ca'], 'Client CA (PEM)', { placeholder: 'empty: no client certificate asked' }),
      handshakeNote(handshakeMs));
  };
  const on = h('input', {
    type: 'checkbox', checked: !!getAt(model, path), 'aria-label': 'Terminate TLS on this bind',
    onchange: () => { setAt(model, path, on.checked ? { certificates: certNames.slice(0, 1) } : undefined); render(); },
  });
  render();
  const fs = group(path, 'TLS', h('label', { class: 'check' }, on, ' terminate TLS'), box);
  fs.classList.add('tls');
  return fs;
}

// frontendForm edits f as GET returns it now (its ETag sent back as
// If-Match), or creates a frontend when f is null.
async function frontendForm(ctx, f, backends, certNames) {
  const backendNames = backends.map((b) => b.name);
  const editing = !!f;
  const ed = editing ? await loadForEdit(`/api/v1/frontends/${enc(f.name)}`) : null;
  if (editing) f = ed.data;
  const modeOf = (name) => { const b = backends.find((x) => x.name === name); return b ? b.mode || 'tcp' : null; };
  const model = editing ? ed.data : {
    name: '', mode: modeOf(backendNames[0]) || 'tcp', default_backend: backendNames[0] || '', splice: 'auto',
    binds: [{ name: 'b1', address: defaultBindAddress(), port: undefined }], routes: [],
  };
  return modal((close) => {
    const routesBox = h('div');
    const renderRoutes = () => {
      clear(routesBox);
      routesBox.append(rows(model, ['routes'], {
        title: 'Routes (first match wins)', add: 'Add route',
        blank: { backend: backendNames[0] || '' },
        rowFn: (p) => model.mode === 'tcp' ? [
          input(model, [...p, 'sni'], 'SNI', 'text', { placeholder: 'a.example.com or *.example.com' }),
          input(model, [...p, 'backend'], 'Backend', 'select', { options: backendNames }),
        ] : [
          input(model, [...p, 'host'], 'Host', 'text', { optional: true, placeholder: 'any' }),
          input(model, [...p, 'path_prefix'], 'Path prefix', 'text', { optional: true, placeholder: '/' }),
          input(model, [...p, 'method'], 'Method', 'text', { optional: true, placeholder: 'any' }),
          input(model, [...p, 'backend'], 'Backend', 'select', { options: backendNames }),
        ],
      }));
    };
    renderRoutes();
    // The http options, shown in http mode.
    const httpBox = h('div');
    const renderHTTP = () => {
      clear(httpBox);
      if (model.mode !== 'http') {
        if (!editing) delete model.http; // a tcp frontend has no http options
        return;
      }
      // The boxes show, and the form sends, every option explicitly: a
      // new frontend starts from the server's defaults (X-Forwarded-For
      // on), so an unticked box is sent as false, never left out for the
      // server to default to true.
      model.http = { ...HTTP_DEFAULTS, ...Object.fromEntries(Object.entries(model.http || {}).filter(([, v]) => v != null)) };
      httpBox.append(group(['http'], 'HTTP', h('div', { class: 'fields' },
        input(model, ['http', 'x_forwarded_for'], 'Add X-Forwarded-For', 'bool'),
        input(model, ['http', 'x_forwarded_proto'], 'Add X-Forwarded-Proto', 'bool'),
        input(model, ['http', 'via'], 'Add Via', 'bool'),
        input(model, ['http', 'max_body_size'], 'Max body size (bytes)', 'int', { min: 0, placeholder: '0 = unlimited', hint: 'larger bodies get 413' }),
        versionsField(model)),
      h2Fields(model)));
    };
    renderHTTP();
    const onMode = () => { renderRoutes(); renderHTTP(); };
    const modeField = input(model, ['mode'], 'Mode', 'select', { options: ['tcp', 'http'], onchange: onMode });
    // A new frontend takes the mode of the backend chosen (a tcp frontend
    // cannot send to an http backend); the operator may still change it.
    const onBackend = (name) => {
      const m = modeOf(name);
      if (editing || !m || m === model.mode) return;
      model.mode = m;
      modeField.querySelector('select').value = m;
      onMode();
    };
    const body = h('div', { data: { ptr: '/' } },
      h('div', { class: 'fields' },
        editing ? h('div', { class: 'field', data: { ptr: '/name' } }, h('label', null, 'Name'), h('input', { value: f.name, disabled: true }), h('div', { class: 'err' }))
          : input(model, ['name'], 'Name', 'text', { required: true, placeholder: 'public' }),
        modeField,
        input(model, ['default_backend'], 'Default backend', 'select', { options: [['', '(none)'], ...backendNames], optional: true, onchange: onBackend }),
        input(model, ['splice'], 'Splice', 'select', { options: ['auto', 'on', 'off'] }),
        input(model, ['maxconn'], 'Maxconn', 'int', { min: 0, placeholder: '0 = global' }),
        input(model, ['access_log'], 'Access log', 'bool', { hint: 'one line per request (http) or connection (tcp)' })),
      group(['timeouts'], 'Timeouts (ms; empty = default)', h('div', { class: 'fields' },
        input(model, ['timeouts', 'client_ms'], 'Client', 'int', { min: 0, placeholder: '30000' }),
        input(model, ['timeouts', 'tunnel_ms'], 'Tunnel', 'int', { min: 0, placeholder: '3600000' }),
        input(model, ['timeouts', 'http_request_ms'], 'HTTP request', 'int', { min: 0 }),
        input(model, ['timeouts', 'http_keep_alive_ms'], 'HTTP keep-alive', 'int', { min: 0 }),
        input(model, ['timeouts', 'handshake_ms'], 'TLS handshake', 'int', { min: 0, placeholder: `${HANDSHAKE_DEFAULT_MS} with TLS`, hint: 'a TLS handshake (or an SNI route\'s ClientHello) must end within it' }))),
      rows(model, ['binds'], {
        title: 'Binds', add: 'Add bind row',
        blank: (i) => ({ name: `b${i + 1}`, address: defaultBindAddress() }),
        rowFn: (p) => bindFields(model, p, certNames, model.mode, () => getAt(model, ['timeouts', 'handshake_ms'])),
      }),
      httpBox,
      routesBox,
      rulesField(model),
      limitsField(model));
    return formShell(editing ? `Edit frontend ${f.name}` : 'New frontend', body, {
      submitLabel: editing ? 'Save' : 'Create', preview: true, onCancel: () => close(),
      onSubmit: async (form, dry) => {
        const path = editing ? `/api/v1/frontends/${enc(f.name)}` : '/api/v1/frontends';
        const method = editing ? 'PUT' : 'POST';
        if (dry) return previewPlan(form, method, path, model);
        const what = `${editing ? 'Saved' : 'Created'} frontend ${model.name}`;
        if (editing) {
          if (!await guardedWrite(ctx, form, ed, method, path, model, what, () => { close(); openForm(ctx, () => frontendForm(ctx, f, backends, certNames)); })) return;
        } else {
          await write(ctx, method, path, model, what);
        }
        close(true);
        ctx.refresh();
      },
    });
  }, { label: editing ? `Edit frontend ${f.name}` : 'New frontend', wide: true });
}

function bindForm(ctx, f, certNames) {
  const model = { name: `b${f.binds.length + 1}`, address: f.binds[0] ? f.binds[0].address : defaultBindAddress() };
  const fields = bindFields(model, [], certNames, f.mode, () => f.timeouts && f.timeouts.handshake_ms);
  const tls = fields.pop(); // a fieldset of its own under the grid of fields
  const proxy = fields.pop(); // as the PROXY protocol's
  return modal((close) => formShell(`Add a bind to ${f.name}`, h('div', { data: { ptr: '/' } }, h('div', { class: 'fields' }, fields), proxy, tls), {
    submitLabel: 'Add', preview: true, onCancel: () => close(),
    onSubmit: async (form, dry) => {
      const path = `/api/v1/frontends/${enc(f.name)}/binds`;
      if (dry) return previewPlan(form, 'POST', path, model);
      await write(ctx, 'POST', path, model, `Added bind ${f.name}/${model.name}`);
      close(true);
      ctx.refresh();
    },
  }), { label: 'Bind' });
}
