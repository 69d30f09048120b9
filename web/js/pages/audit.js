// Audit log: who changed what, newest first, a page at a time.

import { h, clear, ago, badge, planList } from '../dom.js';
import { jsonDiff, show } from '../diff.js';
import { request, ApiError } from '../api.js';
import { notAvailable } from '../common.js';

const PAGE = 50;

function entriesOf(d) {
  if (Array.isArray(d)) return { items: d, next: null };
  if (d && typeof d === 'object') {
    const items = d.entries || d.items || d.records || d.audit || [];
    const next = d.next ?? d.next_cursor ?? d.cursor ?? d.before ?? null;
    return { items: Array.isArray(items) ? items : [], next, total: d.total ?? null };
  }
  return { items: [], next: null };
}

// changeTable shows what one write changed in one object.
function changeTable(before, after) {
  const d = jsonDiff(before ?? undefined, after ?? undefined);
  if (!d.length) return h('p', { class: 'muted' }, 'no field changed');
  return h('table', { class: 'diff' }, h('tbody', null, d.map((x) => h('tr', { class: x.op },
    h('td', { class: 'op' }, x.op === 'add' ? '+' : x.op === 'del' ? '−' : '~'),
    h('td', { class: 'path' }, x.path.replace(/^\./, '') || '(object)'),
    h('td', { class: 'old' }, show(x.old)), h('td', { class: 'new' }, show(x.new))))));
}

function str(v) { return v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v); }

export default async function audit(ctx, root) {
  root.append(h('div', { class: 'page-head' }, h('h1', null, 'Audit log'), h('span', { class: 'muted' }, 'every write and every refused write, newest first')));
  const panel = h('section', { class: 'panel', id: 'audit' });
  root.append(panel);
  const stack = []; // query strings of the pages before this one

  const load = async (query) => {
    let res;
    try {
      res = await request('GET', '/api/v1/audit' + query);
    } catch (e) {
      clear(panel);
      if (e instanceof ApiError && e.status === 404) panel.append(notAvailable('the audit log', '/api/v1/audit'));
      else if (e instanceof ApiError && e.status === 403) panel.append(h('p', { class: 'notice' }, 'Your role may not read the audit log.'));
      else throw e;
      return;
    }
    const { items, next } = entriesOf(res.data);
    clear(panel);
    if (!items.length && !stack.length) { panel.append(h('p', { class: 'empty' }, 'No entry yet.')); return; }
    panel.append(h('div', { class: 'tablewrap' }, h('table', { id: 'audit-table' },
      h('thead', null, h('tr', null, ['When', 'Who', 'Request', 'Result', 'Change'].map((t) => h('th', null, t)))),
      h('tbody', null, items.map((e) => {
        const status = e.status ?? e.code ?? (e.result && e.result.status);
        const ok = e.ok ?? (typeof status === 'number' ? status < 400 : (typeof e.result === 'string' ? /ok|success|accept/i.test(e.result) : null));
        const changes = Array.isArray(e.changes) ? e.changes : null;
        const diff = e.diff ?? e.change ?? null;
        return h('tr', { data: { seq: String(e.seq ?? '') } },
          h('td', { title: str(e.time ?? e.ts), style: 'white-space:nowrap' }, ago(e.time ?? e.ts)),
          h('td', null, h('b', null, str(e.actor ?? e.token ?? e.user ?? '—')), h('div', { class: 'muted mono' }, str(e.remote ?? e.remote_addr ?? ''))),
          h('td', { class: 'mono' }, `${str(e.method)} ${str(e.path)}`, h('div', { class: 'muted' }, str(e.request_id ?? ''))),
          h('td', null, badge(str(status ?? (typeof e.result === 'string' ? e.result : '')) || (ok ? 'ok' : 'refused'), ok === true ? 'ok' : ok === false ? 'bad' : ''),
            e.generation !== undefined ? h('div', { class: 'muted' }, `gen ${e.generation}`) : null,
            e.error ? h('div', { class: 'muted' }, str(e.error).replace(/^urn:spliced:problem:[a-z-]+:\s*/, '')) : null),
          h('td', null,
            e.plan && e.plan.items && e.plan.items.length ? planList(e.plan) : null,
            changes && changes.length ? h('details', null, h('summary', null, `${changes.length} object${changes.length > 1 ? 's' : ''} changed`),
              changes.map((c) => h('div', null, h('code', null, c.object || ''), changeTable(c.before, c.after)))) : null,
            diff ? h('details', null, h('summary', null, 'show'), h('pre', { class: 'mono' }, JSON.stringify(diff, null, 2))) : null,
            !changes && !diff && !(e.plan && e.plan.items && e.plan.items.length) ? '—' : null));
      })))));
    const pager = h('div', { class: 'pager' });
    if (stack.length) {
      pager.append(h('button', { type: 'button', class: 'btn small', onclick: () => load(stack.pop()) }, 'Newer'));
    }
    // Older entries: the Link rel="next" of the answer, else the seq of
    // the last entry (?before=), else the server's cursor.
    let nextQuery = null;
    const link = res.headers.get('Link') || '';
    const m = /<([^>]*)>\s*;\s*rel="?next"?/.exec(link);
    const last = items[items.length - 1];
    if (m) nextQuery = m[1].slice(m[1].indexOf('?'));
    else if (next !== null && next !== undefined && next !== '') nextQuery = `?limit=${PAGE}&before=${encodeURIComponent(next)}`;
    else if (items.length >= PAGE && last && typeof last.seq === 'number') nextQuery = `?limit=${PAGE}&before=${last.seq}`;
    if (nextQuery && nextQuery.startsWith('?')) pager.append(h('button', { type: 'button', class: 'btn small', onclick: () => { stack.push(query); load(nextQuery); } }, 'Older'));
    panel.append(pager);
  };
  await load(`?limit=${PAGE}`);
}
