// Several nodes, one configuration (--store etcd://…): which nodes applied
// a write, and the store's reachability.
//
// A write answered in cluster mode says which live nodes run its
// generation: the X-Spliced-Nodes-Applied, -Refused and -Pending headers
// (comma-separated names, on every answer, 204 included) and, where there
// is a body, its "nodes" member (a WaitResult, with each refusal's error).
// On a single node (the state directory) there is neither: nothing is said.
//
// While the store cannot be reached, reads are served from this node's
// copy with X-Spliced-Stale: true, writes get 503 store-unavailable, and
// /api/v1/info says store.connected false: a banner under the header says
// so until /api/v1/info says the store is back.

import { h, clear, ago, when as stamp } from './dom.js';
import { get, onAnswer, loginShown } from './api.js';

// nodesOf reads the nodes part of a write's answer ({status, data,
// headers}): {applied, refused: [{name, error, generation}], pending}, or
// null when the answer has none (a single node, a dry run).
export function nodesOf(r) {
  if (!r) return null;
  const body = r.data && r.data.nodes && typeof r.data.nodes === 'object' && !Array.isArray(r.data.nodes) ? r.data.nodes : null;
  const wr = body && (Array.isArray(body.applied) || Array.isArray(body.refused) || Array.isArray(body.pending)) ? body : null;
  const hd = (k) => {
    const v = r.headers && typeof r.headers.get === 'function' ? r.headers.get('X-Spliced-Nodes-' + k) : null;
    return v === null ? null : v.split(',').map((s) => s.trim()).filter((s) => s !== '');
  };
  const ha = hd('Applied'); const hr = hd('Refused'); const hp = hd('Pending');
  if (!wr && ha === null && hr === null && hp === null) return null;
  const errors = new Map();
  for (const n of (wr && wr.refused) || []) {
    if (n && typeof n === 'object') errors.set(n.name, n);
    else if (typeof n === 'string') errors.set(n, { name: n });
  }
  const refusedNames = hr ?? [...errors.keys()];
  return {
    applied: ha ?? ((wr && wr.applied) || []),
    refused: refusedNames.map((name) => {
      const n = errors.get(name) || {};
      return { name, error: n.error || '', generation: n.refused_generation || n.running_generation || null };
    }),
    pending: hp ?? ((wr && wr.pending) || []),
    waitedMs: wr && typeof wr.waited_ms === 'number' ? wr.waited_ms : null,
  };
}

// nodesText says it in one line: "applied on a, b · refused on c: <error>
// · pending on d"; empty for null.
export function nodesText(n) {
  if (!n) return '';
  const parts = [];
  if (n.applied.length) parts.push(`applied on ${n.applied.join(', ')}`);
  for (const r of n.refused) parts.push(`refused on ${r.name}${r.error ? ': ' + r.error : ''}`);
  if (n.pending.length) parts.push(`pending on ${n.pending.join(', ')}`);
  if (!parts.length) parts.push('no live node answered');
  return parts.join(' · ');
}

// nodesNote is the nodes part of a write's toast, as a node (one line per
// outcome, refusals in full), or null when the answer has none.
export function nodesNote(r) {
  const n = nodesOf(r);
  if (!n) return null;
  const line = (cls, text) => h('div', { class: 'nodes-' + cls }, text);
  return h('div', { class: 'write-nodes', data: { nodes: '' } },
    n.applied.length ? line('applied', `applied on ${n.applied.join(', ')}`) : null,
    n.refused.map((x) => line('refused', `refused on ${x.name}${x.error ? ': ' + x.error : ''}`)),
    n.pending.length ? line('pending', `pending on ${n.pending.join(', ')}`) : null,
    !n.applied.length && !n.refused.length && !n.pending.length ? line('pending', 'no live node answered') : null);
}

// nodesKind is the toast's kind for a write's answer: "warn" when a node
// refused it or has not applied it yet.
export function nodesKind(r) {
  const n = nodesOf(r);
  return n && (n.refused.length || n.pending.length) ? 'warn' : '';
}

// ---- the store's reachability ----

const banner = () => document.getElementById('store-banner');
let staleSince = null; // Date, or '' when unknown; null: the store is reachable
let checking = null;
let recheck = null;

// showStale turns the banner on or off. since: a time the store became
// unreachable (or null: unknown).
function showStale(on, since) {
  const el = banner();
  if (!el) return;
  if (!on) {
    staleSince = null;
    el.hidden = true;
    clear(el);
    document.body.classList.remove('store-stale');
    if (recheck) { clearInterval(recheck); recheck = null; }
    return;
  }
  const s = since ? new Date(since) : null;
  staleSince = s && !Number.isNaN(s.getTime()) && s.getTime() > 0 ? s : '';
  const when = staleSince ? h('span', { id: 'store-since' }, ' since ',
    h('time', { datetime: staleSince.toISOString() }, stamp(staleSince)),
    h('span', { class: 'muted' }, ' (', h('span', { data: { ago: staleSince.toISOString() } }, ago(staleSince)), ')')) : '';
  clear(el).append(h('b', null, 'Configuration store unreachable'), when,
    ': showing this node\'s copy; changes are refused (HTTP 503) until it is back.');
  el.hidden = false;
  document.body.classList.add('store-stale');
  // Until the store is back, ask /api/v1/info every 5 s (cheap), so the
  // banner goes away by itself.
  if (!recheck) recheck = setInterval(() => { if (!loginShown()) checkStore(); }, 5000);
}

// noteInfo takes the store part of an /api/v1/info or /api/v1/cluster
// answer.
export function noteStore(store) {
  if (!store || typeof store !== 'object') return;
  if (store.connected === false) showStale(true, store.since);
  else if (store.connected === true && staleSince !== null) showStale(false);
}

// checkStore reads /api/v1/info once (one at a time) and shows what it
// says of the store.
export function checkStore() {
  if (checking) return checking;
  checking = get('/api/v1/info', { noLogin: true }).then((info) => noteStore(info && info.store))
    .catch(() => { /* the admin API is away: the live indicator says so */ })
    .finally(() => { checking = null; });
  return checking;
}

export function storeStale() { return staleSince !== null; }

// watchStore makes an idle page notice the store going away too: in
// cluster mode /api/v1/info is read every 10 s (the events stream carries
// no stale mark).
let watching = null;
export function watchStore(store) {
  if (watching || !store || !store.kind || store.kind === 'dir') return;
  watching = setInterval(() => { if (!document.hidden && !loginShown()) checkStore(); }, 10000);
}

// Every API answer passes here: a stale read or a 503 store-unavailable
// turns the banner on (the time it began comes from /api/v1/info).
onAnswer((res, problem) => {
  const stale = res.headers.get('X-Spliced-Stale') === 'true';
  const unavailable = res.status === 503 && problem && /store-unavailable$/.test(String(problem.type || ''));
  if ((stale || unavailable) && staleSince === null) {
    showStale(true, null);
    checkStore();
  }
});
