// Helpers shared by the pages: writes with feedback, live cells.

import { request, ApiError } from './api.js';
import { h, toast, planSummary, num, bytes, rate, badge, ago } from './dom.js';
import { nodesNote, nodesKind } from './cluster.js';

// write performs one API write and says what happened (in cluster mode,
// which nodes applied it: writeToast). Errors propagate to the caller
// (forms map them to fields); quick actions use act().
export async function write(ctx, method, path, body, what, opts) {
  const r = await ctx.writing(() => request(method, path, body, opts));
  const gen = (r.data && r.data.generation) ?? r.headers.get('X-Spliced-Generation');
  writeToast(r, `${what} · generation ${gen}${r.data && r.data.plan ? ' · ' + planSummary(r.data.plan) : ''}`);
  return r;
}

// writeToast says a write's outcome: msg and, in cluster mode, which
// nodes applied it, refused it (with the error) or have not yet (a warning
// toast then, shown longer). On a single node it is msg alone.
export function writeToast(r, msg) {
  const note = nodesNote(r);
  toast(note ? [h('div', null, msg), note] : msg, nodesKind(r));
}

// act runs a button's write, disabling the button meanwhile; a refusal is
// shown as a toast with the problem's detail.
export async function act(ctx, button, fn) {
  if (button) button.disabled = true;
  try {
    await fn();
    return true;
  } catch (e) {
    toast(problemText(e), 'bad');
    return false;
  } finally {
    if (button && button.isConnected) button.disabled = false;
  }
}

// problemText says why a request failed: the problem's title and detail,
// with its status (a 503 "store unavailable" must read as such).
export function problemText(e) {
  if (!(e instanceof ApiError)) return e.message;
  return `${e.problem.title || 'Refused'}${e.status ? ` (HTTP ${e.status})` : ''}: ${e.message}`;
}

// statKey names a live value: fe/NAME/field, be/NAME/field, srv/BE/SRV/field.
export function statKey(...parts) { return parts.map(String).join('/'); }

function lookup(st, key) {
  if (!st) return undefined;
  const p = key.split('/');
  if (p[0] === 'fe') { const f = st.frontends.get(p[1]); return f ? f[p[2]] : undefined; }
  if (p[0] === 'be') { const b = st.backends.get(p[1]); return b ? b[p[2]] : undefined; }
  if (p[0] === 'srv') {
    const b = st.backends.get(p[1]);
    const s = b && b.servers.get(p[2]);
    return s ? s[p[3]] : undefined;
  }
  return undefined;
}

// cell makes a live cell; paint() fills it from the latest stats.
export function cell(tag, key, fmt = 'num', attrs = {}) {
  return h(tag, { ...attrs, data: { stat: key, fmt } }, '—');
}

// healthBadge is a server's health: "up" only when a check says so (a
// server without health check is "no check"), "down" with the reason.
export function healthBadge(s) {
  if (!s || (s.health === null && s.up === null)) return badge('unknown');
  const st = s.health || (s.up ? 'up' : 'down');
  if (s.check === null && s.up === true) {
    const b = badge('no check');
    b.title = 'No health check: the server is used as if up';
    return b;
  }
  const kind = s.up === true ? 'ok' : s.up === false ? 'bad' : /^(drain|maint)/.test(st) ? 'warn' : '';
  return badge(st, kind);
}

// checkText says a health check's last result as HAProxy names it, with
// its reason: "L7STS 503: status 503".
export function checkText(c) {
  if (!c) return '';
  const head = c.status + (c.code && !/^L7OK/.test(c.status) ? ' ' + c.code : '');
  const plain = !c.reason || c.reason === head || (c.code && c.reason === `status ${c.code}`);
  return plain ? head : `${head}: ${c.reason}`;
}

// healthCell is the content of a server's health cell: the badge and,
// when the check fails, why and since when.
export function healthCell(s) {
  const out = [healthBadge(s)];
  const c = s && s.check;
  if (c && (s.up === false || !/OK$/.test(c.status))) {
    out.push(h('div', { class: 'check-why', 'data-check': c.status },
      checkText(c), c.since ? h('span', { class: 'muted' }, ` · since ${ago(c.since)}`) : null));
  }
  return out;
}

export function paint(root, live) {
  const st = live.stats;
  // A line shown when its object's stats have a member (data-present
  // names the flag): once shown it stays.
  root.querySelectorAll('[data-present][hidden]').forEach((el) => {
    if (lookup(st, el.dataset.present) === true) el.hidden = false;
  });
  root.querySelectorAll('[data-stat]').forEach((el) => {
    const key = el.dataset.stat;
    const fmt = el.dataset.fmt;
    if (fmt === 'rate-req' || fmt === 'rate-bytes' || fmt === 'rate-e5') {
      const r = live.rates.get(key.split('/')[1]);
      const v = r ? (fmt === 'rate-req' ? r.req : fmt === 'rate-e5' ? r.e5 : r.bytes) : null;
      const text = fmt === 'rate-bytes' ? (v === null || v === undefined ? '—' : bytes(v) + '/s') : rate(v);
      if (el.textContent !== text) el.textContent = text;
      return;
    }
    if (fmt === 'health') {
      const p = key.split('/');
      const b = st && st.backends.get(p[1]);
      const s = b && b.servers.get(p[2]);
      el.replaceChildren(...healthCell(s));
      return;
    }
    const v = lookup(st, key);
    let text;
    if (fmt === 'bytes') text = bytes(v ?? null);
    else if (fmt === 'ago') text = v === undefined || v === null ? '—' : (typeof v === 'number' ? ago(Date.now() - v * 1000) : ago(v));
    else text = num(v ?? null);
    if (el.textContent !== text) el.textContent = text;
    // Error counters (data-fmt="err") turn red when not zero.
    if (fmt === 'err') el.classList.toggle('bad-v', typeof v === 'number' && v > 0);
  });
}

// notAvailable is the page's word for an endpoint this spliced does not
// serve (404: an older build behind the page, or a route turned off).
export function notAvailable(what, path) {
  return h('p', { class: 'notice', 'data-na': path }, `Not available: ${what} (`, h('code', null, 'GET ' + path), ' answers 404 Not Found on this spliced).');
}

// subscribe adds live listeners and returns the function removing them.
export function subscribe(live, map) {
  for (const [ev, fn] of Object.entries(map)) live.addEventListener(ev, fn);
  return () => { for (const [ev, fn] of Object.entries(map)) live.removeEventListener(ev, fn); };
}
