// The admin page: hash routing, the header (live indicator, role, login),
// and the pages in ./pages/. Every page reads and writes through the REST
// API only (api.js); live counters come from live.js.

import { h, clear, toast, ago } from './dom.js';
import { get, request, setToken, token, setLoginUI, ApiError } from './api.js';
import { Live } from './live.js';
import overview from './pages/overview.js';
import frontends from './pages/frontends.js';
import backends from './pages/backends.js';
import tuning from './pages/tuning.js';
import certificates from './pages/certificates.js';
import cpu from './pages/cpu.js';
import revisions from './pages/revisions.js';
import audit from './pages/audit.js';
import logs from './pages/logs.js';
import nodes from './pages/nodes.js';
import status from './pages/status.js';
import { noteStore, watchStore } from './cluster.js';

const pages = {
  overview: { title: 'Overview', render: overview },
  frontends: { title: 'Frontends', render: frontends },
  backends: { title: 'Backends', render: backends },
  status: { title: 'Status', render: status },
  certificates: { title: 'Certificates', render: certificates },
  tuning: { title: 'Tuning', render: tuning },
  cpu: { title: 'CPU & IRQs', render: cpu },
  nodes: { title: 'Nodes', render: nodes },
  revisions: { title: 'Revisions', render: revisions },
  audit: { title: 'Audit log', render: audit, need: 'admin' }, // GET /api/v1/audit is admin only
  logs: { title: 'Access log', render: logs, need: 'admin' }, // GET /api/v1/logs is admin only
};

// mayRead says whether the signed-in role may open a page: a page whose
// reads need a higher role has no link in the nav.
function mayRead(key) {
  const need = pages[key] && pages[key].need;
  return !need || ctx.role === need || ctx.role === 'admin';
}

const main = document.getElementById('main');
const liveEl = document.getElementById('live');
const whoEl = document.getElementById('who');
const logoutBtn = document.getElementById('logout');

const ctx = {
  live: new Live(),
  info: null,
  role: 'admin',
  lastGen: null, // newest generation this page has shown
  // can says whether the signed-in role may do a kind of write: "admin"
  // writes (objects, tuning, revisions) or "server" writes (admin state,
  // weight, drain: operators too).
  can(kind) {
    if (this.role === 'admin') return true;
    if (this.role === 'operator') return kind === 'server';
    return false;
  },
  // refresh renders the page again and gives the focus back to the
  // control that was used: focus, a CSS selector, names it, else it is
  // found again from the control last used on the old page (focusKey).
  // The focus is given once the newest redraw is drawn (see wantFocus).
  refresh(focus) {
    return route(true, focus ? { sel: focus } : focusKey(lastUsed));
  },
  dialogOpen() { return !!document.querySelector('dialog[open]'); },
};

// ---- focus after an action ----
// The control last clicked or typed in (inside the page): an action's
// redraw replaces it, refresh() focuses its counterpart on the new page.
let lastUsed = null;
['click', 'keydown'].forEach((ev) => document.addEventListener(ev, (e) => {
  const el = e.target instanceof Element && e.target.closest('button, a, input, select, textarea, summary, [tabindex]');
  if (el && main.contains(el)) lastUsed = el;
}, true));

// focusKey describes el by what names it across a redraw (its tag, id,
// name, aria-label and data-* attributes other than live values) and its
// rank among the elements matching that, or null.
function focusKey(el) {
  if (!el || !el.isConnected || !main.contains(el) || el === main) return null;
  const keep = (a) => a.name === 'id' || a.name === 'name' || a.name === 'aria-label'
    || (a.name.startsWith('data-') && !/^data-(stat|fmt|ready|ago)$/.test(a.name));
  const sel = el.tagName.toLowerCase() + [...el.attributes].filter(keep).map((a) => `[${a.name}="${CSS.escape(a.value)}"]`).join('');
  return { sel, rank: [...main.querySelectorAll(sel)].indexOf(el) };
}

function findKey(key) {
  if (!key) return null;
  const all = main.querySelectorAll(key.sel);
  return all[key.rank ?? 0] || all[0] || null;
}

// ---- login ----
setLoginUI(() => new Promise((resolve) => {
  const dlg = document.getElementById('login');
  const form = document.getElementById('login-form');
  const inp = document.getElementById('login-token');
  const err = document.getElementById('login-error');
  err.textContent = token() ? 'The token was refused. Enter another one.' : '';
  inp.value = '';
  const onCancel = (e) => e.preventDefault(); // no way around the login
  const onSubmit = async (e) => {
    e.preventDefault();
    const t = inp.value.trim();
    if (!t) { err.textContent = 'Enter a token.'; return; }
    err.textContent = '';
    try {
      const res = await fetch('/api/v1/info', { headers: { Accept: 'application/json', Authorization: 'Bearer ' + t }, cache: 'no-store' });
      if (res.status === 401 || res.status === 403) { await res.text(); err.textContent = 'This token was refused.'; inp.select(); return; }
      if (res.status === 429) { await res.text(); err.textContent = `Too many failed attempts; retry in ${res.headers.get('Retry-After') || 'a few'} s.`; return; }
      await res.text();
    } catch (x) {
      err.textContent = 'The admin API cannot be reached.';
      return;
    }
    setToken(t);
    form.removeEventListener('submit', onSubmit);
    dlg.removeEventListener('cancel', onCancel);
    dlg.close();
    resolve();
    loadInfo().then(() => route(true));
  };
  form.addEventListener('submit', onSubmit);
  dlg.addEventListener('cancel', onCancel);
  if (!dlg.open) dlg.showModal();
  inp.focus();
}));

logoutBtn.addEventListener('click', () => {
  setToken('');
  location.reload();
});

// probeRole finds what a token may do when /api/v1/info does not say:
// dry-run writes change nothing, and a 403 tells the role is below what
// the write needs (tuning: admin; a server: operator).
async function probeRole() {
  const allowed = async (method, path) => {
    try {
      await request(method, path + '?dry_run=true', {}, { noLogin: true });
      return true;
    } catch (e) {
      return !(e instanceof ApiError && (e.status === 403 || e.status === 401));
    }
  };
  if (await allowed('PATCH', '/api/v1/tuning')) return 'admin';
  try {
    const bks = await get('/api/v1/backends');
    const b = bks.find((x) => x.servers && x.servers.length);
    if (b && await allowed('PATCH', `/api/v1/backends/${encodeURIComponent(b.name)}/servers/${encodeURIComponent(b.servers[0].name)}`)) return 'operator';
  } catch { /* keep the safe answer */ }
  return 'viewer';
}

async function loadInfo() {
  try {
    const info = await get('/api/v1/info');
    ctx.info = info;
    if (ctx.lastGen === null && typeof info.generation === 'number') ctx.lastGen = info.generation;
    const r = info.role ?? (info.token && info.token.role) ?? (info.auth && info.auth.role);
    ctx.role = typeof r === 'string' && r ? r.toLowerCase() : (token() ? await probeRole() : 'admin');
    document.getElementById('version').textContent = info.version ? 'v' + String(info.version).replace(/^v/, '') : '';
    // In cluster mode the header names the node this page talks to.
    const clustered = info.store && info.store.kind && info.store.kind !== 'dir';
    const nodeEl = document.getElementById('node');
    nodeEl.textContent = clustered && info.node && info.node.name ? info.node.name : '';
    nodeEl.hidden = !nodeEl.textContent;
    nodeEl.title = nodeEl.textContent ? `This page talks to node ${info.node.name} (store ${info.store.kind})` : '';
    noteStore(info.store);
    watchStore(info.store);
    const name = info.token_name ?? (info.token && info.token.name) ?? (info.auth && info.auth.name) ?? info.actor;
    whoEl.textContent = `${name ? name + ' · ' : ''}${ctx.role}`;
    whoEl.title = name ? `Signed in as token "${name}", role ${ctx.role}` : `Role ${ctx.role}`;
    document.body.dataset.role = ctx.role;
    document.querySelectorAll('#nav a').forEach((a) => { a.hidden = !mayRead(a.dataset.route); });
  } catch (e) {
    if (!(e instanceof ApiError)) toast('The admin API cannot be reached.', 'bad');
  }
  logoutBtn.hidden = !token();
}

// ---- live indicator ----
function paintLive() {
  const lv = ctx.live;
  let cls = 'off'; let text = 'no live data';
  if (lv.statsMissing && !lv.statsAt) {
    text = 'stats not available yet';
  } else if (lv.statsAt) {
    const age = Math.round(lv.age() / 1000);
    if (lv.isStale()) { cls = 'stale'; text = `stale · ${age} s old`; }
    else { cls = 'on'; text = lv.mode === 'sse' ? 'live' : 'live (polling)'; }
  } else {
    text = 'connecting…';
  }
  liveEl.className = 'live ' + cls;
  liveEl.dataset.statsAt = String(lv.statsAt); // when the shown sample came (tests wait for the next)
  if (liveEl.textContent !== text) liveEl.textContent = text;
  liveEl.title = lv.mode === 'sse' ? 'Live data from /api/v1/events' : 'Polling /api/v1/stats every 2 s';
  main.classList.toggle('is-stale', cls === 'stale');
}
['stats', 'mode', 'clock'].forEach((ev) => ctx.live.addEventListener(ev, paintLive));

// A configuration change seen on the events stream (someone else's write)
// refreshes the page, unless the operator is in the middle of a form.
ctx.live.addEventListener('change', (e) => {
  const d = e.detail || {};
  const gen = typeof d.generation === 'number' ? d.generation : null;
  if (gen !== null && ctx.lastGen !== null && gen <= ctx.lastGen) return; // already shown
  if (busyWriting) return; // most likely our own write: it refreshes the page itself
  if (gen !== null) ctx.lastGen = gen;
  const el = document.activeElement;
  const editing = ctx.dialogOpen() || (el && main.contains(el) && /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName));
  if (gen !== null) toast(`Generation ${gen}${d.actor ? ' by ' + d.actor : ''}${editing ? ' — reload the page to see it' : ''}`);
  if (!editing) route(true);
});

// Relative times ("3 min ago"): elements with data-ago="<time>" are
// rewritten every 15 s, so a page left open does not keep saying "5 s ago".
function paintAgo() {
  document.querySelectorAll('#main [data-ago], #store-banner [data-ago]').forEach((el) => {
    const text = ago(el.dataset.ago);
    if (el.textContent !== text) el.textContent = text;
  });
}
setInterval(paintAgo, 15000);

// ---- routing ----
let cleanup = null;
let current = '';
let seqNo = 0;
let busyWriting = false;
// writing runs one API write (fn returns request()'s answer); the
// generation it made is then shown already, so that its echo on the
// events stream does not redraw the page a second time.
ctx.writing = async (fn) => {
  busyWriting = true;
  try {
    const r = await fn();
    const gen = r && ((r.data && r.data.generation) ?? (r.headers && r.headers.get('X-Spliced-Generation')));
    if (gen !== null && gen !== undefined && !(r.data && r.data.dry_run)) ctx.lastGen = Math.max(ctx.lastGen ?? 0, Number(gen));
    return r;
  } finally { busyWriting = false; }
};

// wantFocus is the control to focus once the page is drawn again (a
// focusKey): what refresh() asked for, else the control that had the focus
// when the redraw began, so that no redraw (a change seen on the events
// stream, a Retry) drops a keyboard user's focus. A redraw overtaken by a
// newer one leaves it to that one.
let wantFocus = null;

async function route(force = false, focus = null) {
  const hash = location.hash.replace(/^#\/?/, '');
  const [name, ...rest] = hash.split('/');
  const key = pages[name] ? name : 'overview';
  if (!force && key === current && rest.join('/') === ctx.sub) return;
  const a = document.activeElement;
  if (key !== current) wantFocus = null; // another page: hashchange focuses main
  else if (focus) wantFocus = focus;
  else if (a && a !== main && main.contains(a)) wantFocus = focusKey(a);
  current = key;
  ctx.sub = rest.map(decodeURIComponent).join('/');
  const my = ++seqNo;
  document.querySelectorAll('#nav a').forEach((a) => {
    if (a.dataset.route === key) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  });
  document.title = `${pages[key].title} · spliced`;
  if (cleanup) { try { cleanup(); } catch { /* page already gone */ } cleanup = null; }
  ctx.live.wantActivity(key === 'overview' || key === 'cpu');
  ctx.live.wantFull(key === 'frontends'); // its cards show the h2, tls and proxy members
  const root = h('div', { id: 'page-' + key, class: 'page', 'aria-busy': 'true' });
  clear(main).appendChild(root);
  try {
    const c = await pages[key].render(ctx, root);
    if (my !== seqNo) { if (typeof c === 'function') c(); return; }
    cleanup = typeof c === 'function' ? c : null;
    root.setAttribute('aria-busy', 'false');
    root.dataset.ready = '1';
    if (wantFocus) {
      const el = findKey(wantFocus);
      wantFocus = null;
      if (el) el.focus();
      else main.focus({ preventScroll: true }); // the control is gone (deleted row)
    }
  } catch (e) {
    if (my !== seqNo) return;
    if (wantFocus) main.focus({ preventScroll: true });
    wantFocus = null;
    clear(root);
    root.appendChild(h('div', { class: 'panel' }, h('h2', null, pages[key].title),
      h('p', { class: 'notice warn', role: 'alert' }, e instanceof ApiError ? `${e.status}: ${e.message}` : `Could not load: ${e.message}`),
      h('button', { type: 'button', class: 'btn', onclick: () => route(true) }, 'Retry')));
    root.dataset.ready = 'error';
  }
  paintLive();
}

window.addEventListener('hashchange', () => { route(); main.focus({ preventScroll: true }); });
window.addEventListener('unhandledrejection', (e) => {
  // Every promise the pages start is handled; this is the last net so an
  // unexpected failure shows up as a message too (and still in the console).
  toast('Unexpected error: ' + (e.reason && e.reason.message ? e.reason.message : String(e.reason)), 'bad');
});

async function boot() {
  if (!location.hash) history.replaceState(null, '', '#/overview');
  await loadInfo();
  ctx.live.start();
  await route(true);
  paintLive();
}

boot();
