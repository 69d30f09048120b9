// Access log: the last entries of GET /api/v1/logs (admin only), newest
// first, kept live by its ?follow=1 event stream. At most MAX entries are
// kept (and as many rows in the DOM). The filters (frontend, status class,
// termination, abnormal only) are the API's: the page reads, and streams,
// what they select among all the server keeps — the last 1000 entries and
// the last abnormal ones (--access-log-keep-abnormal) — so that a 5xx is
// still found after thousands of normal requests; changing one reads the
// entries again and reopens the stream. Only "Request contains" filters
// the rows on the page.
//
// The stream is one of the token's --admin-max-event-streams-per-token
// (default 4; /api/v1/events of live.js holds another): it is closed when
// the page is left, reconnected with a bounded backoff when it drops, and
// when the server refuses it (429 per token, 503 in all) the page polls
// the last entries instead and tries the stream again later. After each
// (re)connect, and after a burst (the server drops what a stream cannot
// take at once), the last entries are read once more, so what ended while
// disconnected or was dropped is shown too (entries are told apart by
// their content: each holds its start time to the nanosecond).

import { h, clear, badge, bytes, ago, when } from '../dom.js';
import { get, authHeaders, needLogin, loginShown, ApiError } from '../api.js';
import { readEvents } from '../sse.js';
import { notAvailable } from '../common.js';

const MAX = 500;             // entries kept and rows in the DOM
const POLL_MS = 5000;        // polling while the server refuses the stream
const POLL_FOR_MS = 30000;   // then the stream is tried again
const BACKOFF_MIN = 1000;
const BACKOFF_MAX = 30000;
const FLUSH_MS = 150;        // streamed entries are drawn in batches
const BURST = 48;            // a batch this large may have lost entries (see flush)

// Termination states: HAProxy's two letters (README "Logs"): who ended
// it, in which phase, and what each pair the proxy writes means.
const WHO = {
  '-': 'nobody (normal end)', C: 'the client', S: 'the server', P: 'the proxy', R: 'a resource of the proxy',
  K: 'the end of a stop\'s grace', c: 'the client\'s timeout', s: 'the server\'s timeout',
};
const PHASE = { R: 'request head', Q: 'queue', C: 'connect', H: 'response head', D: 'data', '-': 'normal end' };
const STATES = {
  '--': 'normal end',
  CR: 'the client closed or reset within its request head',
  cR: 'http_request_ms passed before a complete head (408); tcp: handshake_ms of SNI inspection',
  PR: 'the proxy refused the request (malformed, too large; 503: no route)',
  SC: 'no usable server, or every connect attempt failed (refused, unreachable)',
  sC: 'the last connect attempt timed out (connect_ms)',
  RC: 'no socket could be created (fd limit)',
  sQ: 'queue_ms passed in the queue',
  SQ: 'the queue found no usable server any more',
  SH: 'the server closed or reset before a complete response head (502)',
  PH: 'the proxy refused the server\'s response head (502)',
  sH: 'server_ms passed waiting for the response head (504)',
  CD: 'the client reset or left during the body (request or response)',
  SD: 'the server reset, left or broke its framing during the response body',
  cD: 'client_ms: the client stalled its request body (408) or stopped reading; tcp: the idle tunnel_ms',
  sD: 'server_ms cut a response in its body; tcp: the server stopped reading',
  CQ: 'the client reset its connection while its request (tcp: connection) waited in the queue',
  CC: 'tcp: the client reset its connection while the connect to the server was under way',
  KD: 'closed at the end of a stop\'s grace (tuning.grace_ms)',
};

// termText explains a termination state: "SC: ended by the server, in the
// connect phase: no usable server, …".
export function termText(t) {
  if (t === '--') return '--: normal end';
  if (typeof t !== 'string' || t.length !== 2) return String(t ?? '');
  const why = STATES[t] ? ': ' + STATES[t] : '';
  return `${t}: ended by ${WHO[t[0]] || `"${t[0]}"`}, in the ${PHASE[t[1]] || `"${t[1]}"`} phase${why}`;
}

function statusClass(e) {
  return typeof e.status === 'number' && e.status >= 100 && e.status < 600 ? `${Math.floor(e.status / 100)}xx` : 'none';
}

function statusBadge(e, cls) {
  if (cls === 'none') {
    const b = badge(e.mode === 'tcp' ? 'tcp' : '—');
    b.title = e.mode === 'tcp' ? 'a tcp connection: no status' : 'no response: the client got nothing';
    return b;
  }
  return badge(String(e.status), { '2xx': 'ok', '3xx': 'accent', '4xx': 'warn', '5xx': 'bad' }[cls]);
}

const pad = (n, w = 2) => String(n).padStart(w, '0');
// millis is an entry's milliseconds (".080"), shown after the page's one
// date and time format (when).
function millis(t) {
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? '' : '.' + pad(d.getMilliseconds(), 3);
}

const ms = (v) => (typeof v === 'number' ? String(v) : '?');
function timersTitle(e) {
  const one = (name, v) => `${name} ${typeof v === 'number' && v < 0 ? 'not reached' : ms(v) + ' ms'}`;
  return [one('Tq request', e.tq_ms), one('Tw queue', e.tw_ms), one('Tc connect', e.tc_ms),
    one('Tr response head', e.tr_ms), one('Ta total', e.ta_ms)].join(' · ');
}

// row draws one entry.
function row(e) {
  const cls = statusClass(e);
  const term = typeof e.termination === 'string' ? e.termination : '';
  const abnormal = term !== '--';
  const route = e.backend ? [h('span', null, e.backend), e.server ? h('span', { class: 'muted' }, '/' + e.server) : null]
    : h('span', { class: 'muted' }, 'no backend');
  return h('tr', { class: abnormal ? 'abnormal' : null, data: { cls, term, fe: e.frontend || '' } },
    h('td', { 'data-label': 'Time', class: 'nowrap', title: when(e.time) },
      h('div', null, h('span', { class: 'mono', 'data-stamp': '' }, when(e.time)), h('span', { class: 'mono muted small', title: 'milliseconds' }, millis(e.time)),
        h('div', { class: 'muted small', title: when(e.time), data: { ago: String(e.time ?? '') } }, ago(e.time)))),
    h('td', { 'data-label': 'Client', class: 'mono client' }, h('div', null, e.client || '—',
      e.client_cert ? h('div', { class: 'muted', title: 'client certificate' }, e.client_cert) : null)),
    h('td', { 'data-label': 'Route', class: 'route' }, h('span', null, h('b', null, e.frontend || '—'), ' → ', route)),
    h('td', { 'data-label': 'Request', class: 'mono req' }, e.mode === 'tcp' && !e.request ? h('span', { class: 'muted' }, 'tcp connection') : (e.request || '—')),
    h('td', { 'data-label': 'Status', class: 'st' }, statusBadge(e, cls)),
    h('td', { 'data-label': 'Tq/Tw/Tc/Tr/Ta ms', class: 'num mono timers', title: timersTitle(e) },
      [e.tq_ms, e.tw_ms, e.tc_ms, e.tr_ms, e.ta_ms].map(ms).join('/')),
    h('td', { 'data-label': 'Bytes in / out', class: 'num nowrap' }, `${bytes(e.bytes_in)} / ${bytes(e.bytes_out)}`),
    h('td', { 'data-label': 'Termination', class: 'term' }, h('span', null,
      h('abbr', { class: 'badge mono ' + (abnormal ? (cls === '5xx' || /^[SsPR]/.test(term) ? 'bad' : 'warn') : ''), title: termText(term) }, term || '?'),
      e.retries > 0 ? h('span', { class: 'muted' }, ` ${e.retries} retr${e.retries > 1 ? 'ies' : 'y'}`) : null)));
}

// legend lists the termination states the proxy writes, for touch
// screens and keyboards (the badges' tooltips say the same).
function legend() {
  return h('details', { class: 'legend', id: 'logs-legend' }, h('summary', null, 'What the termination states mean'),
    h('p', { class: 'muted' }, 'First letter: who ended it (',
      Object.entries(WHO).map(([k, v], i) => [i ? ', ' : '', h('code', null, k), ' ', v]), '). Second: in which phase (',
      Object.entries(PHASE).map(([k, v], i) => [i ? ', ' : '', h('code', null, k), ' ', v]), ').'),
    h('table', { class: 'terms' }, h('tbody', null, Object.entries(STATES).map(([k, v]) =>
      h('tr', null, h('td', null, h('code', null, k)), h('td', null, v))))));
}

// Kept across redraws of the page (a configuration change redraws it).
const keep = { frontend: '', cls: '', term: '', abnormal: false, q: '', paused: false };

// query is the API's filters of the kept selection ("&status=5xx…").
function query() {
  const p = new URLSearchParams();
  if (keep.frontend) p.set('frontend', keep.frontend);
  if (keep.cls) p.set('status', keep.cls);
  if (keep.term) p.set('termination', keep.term);
  if (keep.abnormal) p.set('abnormal', '1');
  const s = p.toString();
  return s ? '&' + s : '';
}
const serverFiltered = () => !!(keep.frontend || keep.cls || keep.term || keep.abnormal);

export default async function logs(ctx, root) {
  root.append(h('div', { class: 'page-head' }, h('h1', null, 'Access log'),
    h('span', { class: 'muted' }, `requests and tcp connections of the frontends with an access log, newest first (the last ${MAX}; the filters search all the server keeps: its last 1000 entries and its last abnormal ones)`)));
  let list; let fes;
  try {
    [list, fes] = await Promise.all([get(`/api/v1/logs?limit=${MAX}${query()}`), get('/api/v1/frontends')]);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) { root.append(h('section', { class: 'panel' }, notAvailable('the access log', '/api/v1/logs'))); return null; }
    if (e instanceof ApiError && e.status === 403) {
      root.append(h('section', { class: 'panel' }, h('p', { class: 'notice', id: 'logs-refused' }, 'Your role may not read the access log: it needs an admin token.')));
      return null;
    }
    throw e;
  }
  const logged = fes.filter((f) => f.access_log).map((f) => f.name);

  // ---- controls ----
  const state = h('span', { class: 'badge', id: 'logs-state', 'data-state': 'connecting' }, 'connecting…');
  const pauseBtn = h('button', { type: 'button', class: 'btn small', id: 'logs-pause', 'aria-pressed': 'false' }, 'Pause');
  const feSel = h('select', { id: 'logs-frontend' }, h('option', { value: '' }, 'all'));
  const clsSel = h('select', { id: 'logs-class' }, h('option', { value: '' }, 'any'),
    ['1xx', '2xx', '3xx', '4xx', '5xx'].map((c) => h('option', { value: c }, c)), h('option', { value: 'none' }, 'none (tcp, no response)'));
  const termSel = h('select', { id: 'logs-term' }, h('option', { value: '' }, 'any'),
    Object.keys(STATES).map((t) => h('option', { value: t, title: termText(t) }, t)));
  const abnBox = h('input', { id: 'logs-abnormal', type: 'checkbox' });
  const qIn = h('input', { id: 'logs-q', type: 'search', placeholder: 'GET /api', autocomplete: 'off', spellcheck: 'false' });
  const shown = h('span', { class: 'muted', id: 'logs-shown' });
  const filters = h('form', { class: 'filters', id: 'logs-filters', role: 'search', 'aria-label': 'Filter the access log', onsubmit: (e) => e.preventDefault() },
    h('div', { class: 'field' }, h('label', { for: 'logs-frontend' }, 'Frontend'), feSel),
    h('div', { class: 'field' }, h('label', { for: 'logs-class' }, 'Status'), clsSel),
    h('div', { class: 'field' }, h('label', { for: 'logs-term' }, 'Termination'), termSel),
    h('div', { class: 'field' }, h('label', { for: 'logs-q' }, 'Request contains'), qIn),
    h('label', { class: 'check', for: 'logs-abnormal', title: 'status 400 or more, or an end other than --: the server keeps the last of these beside its last entries' },
      abnBox, ' Abnormal only (status ≥ 400 or an end other than ', h('code', null, '--'), ')'),
    h('div', { class: 'stream' }, state, pauseBtn));
  const tbody = h('tbody');
  const table = h('table', { id: 'logs-table', class: 'stack logs' },
    h('thead', null, h('tr', null, ['Time', 'Client', 'Frontend → backend/server', 'Request', 'Status', 'Tq/Tw/Tc/Tr/Ta ms', 'Bytes in / out', 'Termination']
      .map((t, i) => h('th', { class: i === 5 || i === 6 ? 'num' : null, title: i === 5 ? 'request head, queue, connect, response head, total; -1: phase not reached' : null }, t)))),
    tbody);
  const empty = h('div', { id: 'logs-empty' });
  const none = h('p', { class: 'empty', id: 'logs-none', hidden: true }, 'No entry the server keeps matches the filters.');
  const panel = h('section', { class: 'panel', id: 'logs' }, h('div', { class: 'tablewrap' }, table), none, empty);
  root.append(h('section', { class: 'panel' }, filters, shown, legend()), panel);

  // ---- entries ----
  const items = [];           // {e, key, tr}, oldest first
  const keys = new Set();
  const feNames = new Set();
  const addFrontend = (name) => {
    if (!name || feNames.has(name)) return;
    feNames.add(name);
    const opts = [...feNames].sort();
    clear(feSel).append(h('option', { value: '' }, 'all'), ...opts.map((n) => h('option', { value: n }, n)));
    feSel.value = keep.frontend;
  };
  fes.forEach((f) => addFrontend(f.name));
  if (keep.frontend) addFrontend(keep.frontend);
  feSel.value = keep.frontend; clsSel.value = keep.cls; termSel.value = keep.term; abnBox.checked = keep.abnormal; qIn.value = keep.q;

  // The server applies the other filters; the text in the request is
  // looked for in the rows the page holds.
  const match = (e) => !keep.q || String(e.request || '').toLowerCase().includes(keep.q.toLowerCase());

  const paintCount = () => {
    const n = items.reduce((k, it) => k + (it.tr.hidden ? 0 : 1), 0);
    const active = serverFiltered() || keep.q;
    shown.textContent = items.length ? `${keep.q ? `${n} of ${items.length}` : items.length} entr${(keep.q ? n : items.length) === 1 ? 'y' : 'ies'} shown${active ? ' (filtered)' : ''}` : '';
    none.hidden = !(serverFiltered() && !items.length) && (!items.length || n > 0);
    table.hidden = !items.length;
    clear(empty);
    if (!items.length && !serverFiltered()) {
      empty.append(logged.length
        ? h('p', { class: 'empty' }, `No entry yet: ${logged.join(', ')} log${logged.length === 1 ? 's' : ''} each request (tcp: each connection); they appear here as they end.`)
        : h('div', { class: 'notice', id: 'logs-off' },
          h('p', null, h('b', null, 'No frontend has its access log on.'), ' Each frontend with ', h('code', null, '"access_log": true'),
            ' logs one entry per http request (per connection in tcp mode), with its timers and how it ended.'),
          h('p', null, 'Turn it on in ', h('a', { href: '#/frontends', id: 'logs-to-frontends' }, 'Frontends'), ' (Edit → Access log), or with ',
            h('code', null, 'PATCH /api/v1/frontends/NAME {"access_log": true}'), '.')));
    }
  };

  // add draws entries (oldest first) at the top, then keeps the last MAX.
  const add = (recs) => {
    if (!recs.length) return;
    const frag = document.createDocumentFragment();
    for (let i = recs.length - 1; i >= 0; i--) { // newest first
      const e = recs[i];
      const tr = row(e);
      tr.hidden = !match(e);
      frag.append(tr);
    }
    tbody.prepend(frag);
    for (const e of recs) {
      const key = JSON.stringify(e);
      items.push({ e, key, tr: null });
      keys.add(key);
      addFrontend(e.frontend);
    }
    // tbody rows are newest first: the new items, in order, are its first rows.
    let tr = tbody.firstElementChild;
    for (let i = items.length - 1; i >= items.length - recs.length; i--) { items[i].tr = tr; tr = tr.nextElementSibling; }
    while (items.length > MAX) {
      const old = items.shift();
      old.tr.remove();
      keys.delete(old.key);
    }
    paintCount();
  };
  const reset = () => { items.length = 0; keys.clear(); clear(tbody); };

  // merge adds what a read of the last entries (recs, oldest first) holds
  // beyond the newest entry already shown. When recs hold entries the page
  // missed before that one (the stream lost some in a burst) or share
  // nothing with it (more than MAX ended meanwhile), the rows are drawn
  // again from recs, then the entries streamed since the read.
  const merge = (recs) => {
    const known = recs.map((e) => keys.has(JSON.stringify(e)));
    const last = known.lastIndexOf(true);
    if (!known.slice(0, last + 1).includes(false) && (last >= 0 || !items.length)) { add(recs.slice(last + 1)); return; }
    const at = last < 0 ? -1 : items.findIndex((it) => it.key === JSON.stringify(recs[last]));
    const newer = at < 0 ? [] : items.slice(at + 1).map((it) => it.e);
    reset();
    add(recs);
    add(newer);
  };

  const refilter = () => {
    keep.q = qIn.value.trim();
    for (const it of items) it.tr.hidden = !match(it.e);
    paintCount();
  };
  qIn.addEventListener('input', refilter);

  add(list);
  paintCount();

  // ---- live ----
  let gone = false;      // the page was left
  let ctl = null;        // the open stream's AbortController
  let timer = null;      // reconnect or poll
  let flushT = null;
  let resyncT = null;   // a read of the last entries after a burst
  let backoff = BACKOFF_MIN;
  let queue = [];        // streamed entries not drawn yet
  let held = null;       // while catching up: streamed entries wait here
  const pending = [];    // while paused
  let dropped = false;   // pending overflowed
  let epoch = 0;         // bumped when the server's filters change: older reads are dropped

  const setState = (s, text) => {
    state.dataset.state = s;
    state.className = 'badge ' + ({ live: 'ok', paused: 'warn', polling: 'warn', reconnecting: 'bad' }[s] || '');
    state.textContent = text;
    state.title = '';
  };
  const paintPause = () => {
    pauseBtn.setAttribute('aria-pressed', String(keep.paused));
    pauseBtn.textContent = keep.paused ? `Resume${pending.length ? ` (${pending.length}${dropped ? '+' : ''} new)` : ''}` : 'Pause';
    pauseBtn.classList.toggle('on', keep.paused);
  };
  const flush = () => {
    flushT = null;
    const recs = queue; queue = [];
    if (keep.paused) {
      pending.push(...recs);
      if (pending.length > MAX) { pending.splice(0, pending.length - MAX); dropped = true; }
      paintPause();
      return;
    }
    add(recs.filter((e) => !keys.has(JSON.stringify(e))));
    // The server drops what a stream cannot take at once (64 entries):
    // after a burst the last entries are read again to fill the holes.
    if (recs.length >= BURST && !resyncT) resyncT = setTimeout(() => { resyncT = null; if (!gone) catchUp(); }, 1000);
  };
  const incoming = (e) => {
    if (held) { held.push(e); return; }
    queue.push(e);
    if (queue.length > MAX) queue.splice(0, queue.length - MAX);
    if (!flushT) flushT = setTimeout(flush, FLUSH_MS);
  };
  // catchUp reads the last entries once the stream is open (what ended
  // while it was not), streamed ones waiting meanwhile.
  // While paused, nothing moves: the read is made on resume instead.
  const catchUp = async () => {
    if (keep.paused) { dropped = true; paintPause(); return; }
    const my = epoch;
    held = [];
    try {
      const recs = await get(`/api/v1/logs?limit=${MAX}${query()}`);
      if (gone || my !== epoch) return;
      flush();
      merge(recs);
    } catch { /* the stream's entries still come */ } finally {
      if (my === epoch) {
        const h2 = held || []; held = null;
        h2.forEach(incoming);
      }
    }
  };

  const again = (ms, s, text) => {
    clearTimeout(timer);
    setState(s, text);
    timer = setTimeout(connect, ms);
  };
  const poll = async (until) => {
    if (gone) return;
    const my = epoch;
    try {
      const recs = await get(`/api/v1/logs?limit=${MAX}${query()}`);
      if (gone || my !== epoch) return;
      if (!keep.paused) merge(recs);
    } catch { /* next round */ }
    if (Date.now() >= until) { connect(); return; }
    timer = setTimeout(() => poll(until), POLL_MS);
  };

  async function connect() {
    if (gone) return;
    clearTimeout(timer);
    if (ctl) ctl.abort(); // one stream at a time: a slot of the token's few
    ctl = null;
    if (loginShown()) await needLogin().catch(() => {});
    if (gone) return;
    const my = new AbortController();
    ctl = my;
    let openedAt = 0;
    try {
      setState('connecting', 'connecting…');
      const res = await fetch(`/api/v1/logs?follow=1${query()}`, { headers: authHeaders({ Accept: 'text/event-stream' }), signal: my.signal, cache: 'no-store' });
      if (res.status === 401) { await res.text(); await needLogin().catch(() => {}); connect(); return; }
      if (res.status === 429 || res.status === 503) {
        // The stream caps (--admin-max-event-streams[-per-token]): poll.
        await res.text();
        setState('polling', `polling every ${POLL_MS / 1000} s`);
        state.title = res.status === 429 ? 'This token has too many event streams open (--admin-max-event-streams-per-token): the last entries are read every few seconds instead'
          : 'The server has too many event streams open (--admin-max-event-streams): the last entries are read every few seconds instead';
        poll(Date.now() + POLL_FOR_MS);
        return;
      }
      if (!res.ok || !res.body) { await res.text(); throw new Error('HTTP ' + res.status); }
      openedAt = Date.now();
      setState('live', 'live');
      catchUp();
      await readEvents(res.body, (type, data) => { if (type === 'access' && data && typeof data === 'object') incoming(data); });
      throw new Error('stream ended');
    } catch (e) {
      if (gone || my.signal.aborted) return;
      if (openedAt && Date.now() - openedAt > 10000) backoff = BACKOFF_MIN; // it ran a while: a new drop, not a loop
      const wait = backoff;
      backoff = Math.min(backoff * 2, BACKOFF_MAX);
      again(wait, 'reconnecting', `disconnected: retry in ${Math.round(wait / 1000)} s`);
    }
  }

  // A change of the server's filters: the entries held are another
  // selection's. Read the new one now (paused or not: it was asked for)
  // and reopen the stream with the new filters.
  const refetch = async () => {
    keep.frontend = feSel.value; keep.cls = clsSel.value; keep.term = termSel.value; keep.abnormal = abnBox.checked;
    const my = ++epoch;
    clearTimeout(timer); clearTimeout(flushT); flushT = null; clearTimeout(resyncT); resyncT = null;
    queue = []; pending.length = 0; dropped = false; held = null;
    reset(); paintCount(); paintPause();
    setState('connecting', 'connecting…');
    if (ctl) ctl.abort();
    ctl = null;
    held = [];
    try {
      const recs = await get(`/api/v1/logs?limit=${MAX}${query()}`);
      if (gone || my !== epoch) return;
      merge(recs);
    } catch { /* the stream's catch-up reads it again */ } finally {
      if (my === epoch) held = null;
    }
    if (!gone && my === epoch) connect();
  };
  [feSel, clsSel, termSel, abnBox].forEach((el) => el.addEventListener('change', refetch));

  pauseBtn.addEventListener('click', () => {
    keep.paused = !keep.paused;
    if (!keep.paused) {
      const recs = pending.splice(0);
      if (dropped) { dropped = false; catchUp(); } else add(recs.filter((e) => !keys.has(JSON.stringify(e))));
    }
    paintPause();
  });
  paintPause();
  connect();

  return () => {
    gone = true;
    clearTimeout(timer); clearTimeout(flushT); clearTimeout(resyncT);
    if (ctl) ctl.abort();
  };
}
