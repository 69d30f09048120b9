// Audit log: who changed what, newest first, a page at a time. Dry runs
// (?dry_run=true: nothing changed) are left out unless asked for, and
// marked "dry run" when shown; the filters (actor, object, result, dry
// runs) are the API's (GET /api/v1/audit?actor=&object=&result=&dry_run=):
// they select over the whole trail, and paging keeps them.

import { h, clear, ago, badge, planList, when as stamp } from '../dom.js';
import { jsonDiff, diffTable } from '../diff.js';
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
  return diffTable(d, 'before', 'after');
}

// breakable lets a long path wrap after its slashes, ? and &, never
// inside a word.
function breakable(text) {
  return text.split(/(?<=[/?&])/).map((part, i) => (i ? [h('wbr'), part] : part));
}

function str(v) { return v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v); }

function statusOf(e) { return e.status ?? e.code ?? (e.result && e.result.status); }
function okOf(e) {
  const status = statusOf(e);
  return e.ok ?? (typeof status === 'number' ? (status > 0 && status < 400) || (status === 0 && e.recovered === 'applied')
    : (typeof e.result === 'string' ? /ok|success|accept/i.test(e.result) : null));
}
function actorOf(e) { return str(e.actor ?? e.token ?? e.user ?? '—'); }

export default async function audit(ctx, root) {
  root.append(h('div', { class: 'page-head' }, h('h1', null, 'Audit log'), h('span', { class: 'muted' }, 'every write and every refused write, newest first')));
  const actorSel = h('select', { id: 'audit-actor' }, h('option', { value: '' }, 'anyone'));
  const objectIn = h('input', { id: 'audit-object', type: 'search', placeholder: 'backend/web', autocomplete: 'off', spellcheck: 'false' });
  const resultSel = h('select', { id: 'audit-result' },
    h('option', { value: '' }, 'any'), h('option', { value: 'ok' }, 'accepted'), h('option', { value: 'refused' }, 'refused'));
  const dryBox = h('input', { id: 'audit-dry', type: 'checkbox' });
  const shown = h('span', { class: 'muted', id: 'audit-shown', 'aria-live': 'polite' });
  const filters = h('form', { class: 'filters', id: 'audit-filters', role: 'search', 'aria-label': 'Filter the audit log', onsubmit: (e) => e.preventDefault() },
    h('div', { class: 'field' }, h('label', { for: 'audit-actor' }, 'Who'), actorSel),
    h('div', { class: 'field' }, h('label', { for: 'audit-object' }, 'Object or path'), objectIn),
    h('div', { class: 'field' }, h('label', { for: 'audit-result' }, 'Result'), resultSel),
    h('label', { class: 'check', for: 'audit-dry' }, dryBox, ' Show dry runs'),
    shown);
  const panel = h('section', { class: 'panel', id: 'audit' });
  root.append(h('section', { class: 'panel' }, filters), panel);
  const stack = []; // query strings of the pages before this one
  const seen = new Set(); // actors of the entries read so far
  let items = [];
  let res = null;
  let query = '';

  // paint draws the entries of the page loaded.
  const paint = () => {
    const rows = items;
    const active = [actorSel.value && 'who', objectIn.value.trim() && 'object', resultSel.value && 'result'].filter(Boolean);
    shown.textContent = `${rows.length} entr${rows.length === 1 ? 'y' : 'ies'} on this page${active.length ? ` · filtered by ${active.join(', ')}` : ''}${dryBox.checked ? '' : ' · dry runs hidden'}`;
    clear(panel);
    if (!items.length && !stack.length && !active.length && dryBox.checked) { panel.append(h('p', { class: 'empty' }, 'No entry yet.')); return; }
    panel.append(rows.length ? h('table', { id: 'audit-table', class: 'stack audit' },
      h('thead', null, h('tr', null, ['When', 'Who', 'Request', 'Result', 'Change'].map((t) => h('th', null, t)))),
      h('tbody', null, rows.map((e) => {
        const status = statusOf(e);
        const ok = okOf(e);
        const changes = Array.isArray(e.changes) ? e.changes : null;
        const diff = e.diff ?? e.change ?? null;
        const when = e.time ?? e.ts;
        return h('tr', { class: e.dry_run ? 'dry' : null, data: { seq: String(e.seq ?? ''), dry: e.dry_run ? '1' : '0' } },
          h('td', { 'data-label': 'When', title: stamp(when), class: 'nowrap' }, h('span', { data: { ago: str(when) } }, ago(when))),
          h('td', { 'data-label': 'Who' }, h('div', null, h('b', null, actorOf(e)), h('div', { class: 'muted mono' }, str(e.remote ?? e.remote_addr ?? '')))),
          h('td', { 'data-label': 'Request', class: 'mono req' }, h('div', null, `${str(e.method)} `, breakable(str(e.path)), h('div', { class: 'muted' }, str(e.request_id ?? '')))),
          h('td', { 'data-label': 'Result' }, h('div', null,
            e.dry_run ? [badge('dry run', 'accent'), ' '] : null,
            badge(str(status || (typeof e.result === 'string' ? e.result : '')) || (ok ? 'ok' : 'refused'), ok === true ? 'ok' : ok === false ? 'bad' : ''),
            e.recovered ? [' ', badge(`recovered: ${e.recovered}`, 'warn')] : null,
            e.generation !== undefined ? h('div', { class: 'muted' }, e.dry_run ? `at gen ${e.generation}, nothing changed`
              : ok === false ? `gen ${e.generation}` // refused: no revision of its own
                : h('a', { href: `#/revisions/${e.generation}`, 'data-gen-link': String(e.generation), 'aria-label': `Generation ${e.generation}: its revision` }, `gen ${e.generation}`)) : null,
            e.error ? h('div', { class: 'muted' }, str(e.error).replace(/^urn:spliced:problem:[a-z-]+:\s*/, '')) : null)),
          h('td', { 'data-label': 'Change', class: 'change' }, h('div', null,
            e.plan && e.plan.items && e.plan.items.length ? planList(e.plan) : null,
            changes && changes.length ? h('details', null, h('summary', null, `${changes.length} object${changes.length > 1 ? 's' : ''} ${e.dry_run ? 'would change' : 'changed'}`),
              changes.map((c) => h('div', null, h('code', null, c.object || ''), changeTable(c.before, c.after)))) : null,
            diff ? h('details', null, h('summary', null, 'show'), h('pre', { class: 'mono' }, JSON.stringify(diff, null, 2))) : null,
            !changes && !diff && !(e.plan && e.plan.items && e.plan.items.length) ? '—' : null)));
      })))
      : h('p', { class: 'empty', id: 'audit-none' }, 'No entry matches the filters.'));
    const pager = h('div', { class: 'pager' });
    if (stack.length) {
      pager.append(h('button', { type: 'button', class: 'btn small', 'data-page': 'newer', onclick: () => turn(stack.pop(), 'newer') }, 'Newer'));
    }
    // Older entries: the Link rel="next" of the answer, else the seq of
    // the last entry (?before=), else the server's cursor.
    const { next } = entriesOf(res.data);
    let nextQuery = null;
    const link = res.headers.get('Link') || '';
    const m = /<([^>]*)>\s*;\s*rel="?next"?/.exec(link);
    const last = items[items.length - 1];
    if (m) nextQuery = m[1].slice(m[1].indexOf('?'));
    else if (next !== null && next !== undefined && next !== '') nextQuery = `?limit=${PAGE}&before=${encodeURIComponent(next)}`;
    else if (items.length >= PAGE && last && typeof last.seq === 'number') nextQuery = `?limit=${PAGE}&before=${last.seq}`;
    if (nextQuery && nextQuery.startsWith('?')) pager.append(h('button', { type: 'button', class: 'btn small', 'data-page': 'older', onclick: () => { stack.push(query); turn(nextQuery, 'older'); } }, 'Older'));
    panel.append(pager);
  };

  let seq = 0; // answers to older requests are dropped
  const load = async (q) => {
    const my = ++seq;
    let r;
    try {
      r = await request('GET', '/api/v1/audit' + q);
      if (my !== seq) return false;
      res = r;
    } catch (e) {
      if (my !== seq) return false;
      clear(panel);
      if (e instanceof ApiError && e.status === 404) panel.append(notAvailable('the audit log', '/api/v1/audit'));
      else if (e instanceof ApiError && e.status === 403) panel.append(h('p', { class: 'notice' }, 'Your role may not read the audit log.'));
      else throw e;
      return false;
    }
    query = q;
    items = entriesOf(res.data).items;
    // The actors seen so far (the list grows as pages are read).
    const known = actorSel.options.length;
    items.forEach((e) => seen.add(actorOf(e)));
    if (seen.size + 1 !== known) {
      const keep = actorSel.value;
      clear(actorSel).append(h('option', { value: '' }, 'anyone'), ...[...seen].sort().map((a) => h('option', { value: a, selected: a === keep }, a)));
    }
    paint();
    return true;
  };
  // turn loads another page and gives the focus back to the pager button
  // that was used (or its neighbour when that one is gone).
  const turn = async (q, which) => {
    if (await load(q)) {
      const b = panel.querySelector(`.pager [data-page="${which}"]`) || panel.querySelector('.pager button');
      if (b) b.focus();
    }
  };
  // first is the query of the newest page under the filters set.
  const first = () => {
    const p = new URLSearchParams({ limit: String(PAGE) });
    if (actorSel.value) p.set('actor', actorSel.value);
    if (objectIn.value.trim()) p.set('object', objectIn.value.trim());
    if (resultSel.value) p.set('result', resultSel.value);
    if (!dryBox.checked) p.set('dry_run', 'false');
    return '?' + p.toString();
  };
  const refilter = () => { stack.length = 0; load(first()); };
  let typing = null;
  [actorSel, resultSel, dryBox].forEach((el) => el.addEventListener('change', refilter));
  objectIn.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(refilter, 250); });
  await load(first());
  return () => clearTimeout(typing);
}
