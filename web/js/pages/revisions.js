// Revisions: the kept generations, a readable diff between two, and
// restore with a confirmation that shows the plan first.

import { h, clear, ago, when, planList, confirmBox, badge, toast } from '../dom.js';
import { get, request, enc, ApiError } from '../api.js';
import { write, act } from '../common.js';
import { jsonDiff, diffTable } from '../diff.js';

export default async function revisions(ctx, root) {
  const [revs, info] = await Promise.all([get('/api/v1/config/revisions'), get('/api/v1/info')]);
  const current = info.generation;
  const canAdmin = ctx.can('admin');
  // A restore replaces the document this page shows (generation current):
  // it sends that document's ETag as If-Match, so that a change made
  // meanwhile is not rolled back unseen.
  const docTag = canAdmin ? (await request('HEAD', '/api/v1/config')).headers.get('ETag') : null;
  root.append(h('div', { class: 'page-head' }, h('h1', null, 'Revisions'),
    h('span', { class: 'muted' }, `current generation ${current}; the last 100 are kept`)));
  if (!revs.length) {
    root.append(h('div', { class: 'panel' }, h('p', { class: 'empty' }, 'No revision yet: every accepted write makes one.')));
    return;
  }

  const gens = revs.map((r) => r.generation);
  const opt = (sel) => gens.map((g) => h('option', { value: String(g), selected: g === sel }, `#${g}`));
  const fromSel = h('select', { id: 'diff-from', 'aria-label': 'From generation' }, opt(gens[1] ?? gens[0]));
  const toSel = h('select', { id: 'diff-to', 'aria-label': 'To generation' }, opt(gens[0]));
  const out = h('div', { id: 'diff-out', 'aria-live': 'polite' });

  const compare = async () => {
    const a = Number(fromSel.value); const b = Number(toSel.value);
    clear(out).append(h('p', { class: 'muted' }, 'Loading…'));
    try {
      const [ra, rb] = await Promise.all([get(`/api/v1/config/revisions/${a}`), get(`/api/v1/config/revisions/${b}?against=${a}`)]);
      const ca = ra.config || ra; const cb = rb.config || rb;
      const strip = (c) => { const x = structuredClone(c); delete x.generation; return x; };
      const d = jsonDiff(strip(ca), strip(cb));
      clear(out).append(
        h('h3', null, `Plan from #${a} to #${b}`), planList(rb.plan),
        h('h3', null, `Changes in the document (${d.length})`),
        d.length ? diffTable(d, `#${a}`, `#${b}`) : h('p', { class: 'muted' }, 'The two documents are the same.'));
    } catch (e) {
      clear(out).append(h('p', { class: 'notice warn', role: 'alert' }, e instanceof ApiError ? `${e.status}: ${e.message}` : e.message));
    }
  };

  // restore asks first, showing the plan and each value that changes
  // (now → after the restore), then writes.
  const restore = async (rev, button) => {
    let plan = null; let d = null; let nowConfig = null; let targetConfig = null;
    try {
      const [target, now] = await Promise.all([get(`/api/v1/config/revisions/${rev}?against=${current}`), get('/api/v1/config')]);
      plan = target.plan;
      nowConfig = now; targetConfig = target.config || target;
      const strip = (c) => { const x = structuredClone(c); delete x.generation; return x; };
      d = jsonDiff(strip(now), strip(targetConfig));
    } catch { /* the plan is a courtesy; the restore answer carries it too */ }
    // A restore that closes listeners is not a weight change: it says
    // which addresses stop accepting, first, and the button says it too.
    const lis = nowConfig && targetConfig ? listenerChanges(nowConfig, targetConfig) : { closes: [], opens: [] };
    const n = lis.closes.length;
    const ok = await confirmBox(`Restore generation ${rev}?`, h('div', { id: 'restore-preview' },
      n ? h('div', { class: 'notice bad', id: 'restore-closes', role: 'alert' },
        h('b', null, `This restore closes ${n} listener${n > 1 ? 's' : ''}`), ': ',
        lis.closes.map((l, i) => [i ? ', ' : '', h('code', null, l.addr), ` (${l.bind})`]),
        '. New connections there are refused; connections already accepted live on.') : null,
      lis.opens.length ? h('p', { class: 'notice', id: 'restore-opens' }, `It opens ${lis.opens.map((l) => `${l.addr} (${l.bind})`).join(', ')}.`) : null,
      h('p', null, `The configuration of generation ${rev} becomes generation ${current + 1}. Nothing is lost: the current one stays in the list.`),
      plan ? [h('h3', null, 'What changes'), planList(plan)] : null,
      d && d.length ? [h('h3', null, `Values (${d.length})`), diffTable(d, 'now', 'after restore', { id: 'restore-diff' })] : null),
    { ok: n ? `Restore #${rev} and close ${n} listener${n > 1 ? 's' : ''}` : `Restore #${rev}`, danger: n > 0 });
    if (!ok) return;
    const restoreWrite = async () => {
      try {
        await write(ctx, 'POST', `/api/v1/config/revisions/${enc(rev)}/restore`, undefined, `Restored generation ${rev}`, { ifMatch: docTag });
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 412) throw e;
        toast(`The configuration changed since this page showed generation ${current}: nothing was restored. The page now shows the current one; restore again if still wanted.`, 'bad');
      }
    };
    // The page is drawn again: the focus goes to the new current row.
    if (await act(ctx, button, restoreWrite)) ctx.refresh('#revisions tbody tr:first-child button');
  };

  root.append(h('div', { class: 'grid two' },
    h('section', { class: 'panel' }, h('h2', null, 'History'), h('table', { id: 'revisions', class: 'stack' },
      h('thead', null, h('tr', null, h('th', null, 'Gen'), h('th', null, 'When'), h('th', null, 'By'), h('th', null, 'Change'), h('th', null, ''))),
      h('tbody', null, revs.map((r, i) => h('tr', { data: { generation: String(r.generation) } },
        h('td', { 'data-label': 'Generation', class: 'first' }, h('b', null, `#${r.generation}`)),
        h('td', { 'data-label': 'When', class: 'nowrap', title: when(r.time) }, h('span', { data: { ago: r.time } }, ago(r.time))),
        h('td', { 'data-label': 'By', class: 'actor' }, r.actor || '—'),
        h('td', { 'data-label': 'Change', class: 'summary-cell' }, h('div', null,
          r.restore_of ? [badge(`restore of #${r.restore_of}`, 'accent'), ' '] : null,
          r.summary || '—', r.generation === current ? [' ', badge('current', 'ok')] : null)),
        h('td', { 'data-label': '', class: 'num' }, h('div', { class: 'inline' },
          i + 1 < revs.length ? h('button', {
            type: 'button', class: 'btn small ghost', 'data-action': 'compare', 'data-generation': String(r.generation),
            'aria-label': `What generation ${r.generation} changed`,
            onclick: () => { fromSel.value = String(revs[i + 1].generation); toSel.value = String(r.generation); compare(); },
          }, 'Diff') : null,
          canAdmin && r.generation !== current ? h('button', {
            type: 'button', class: 'btn small', 'data-write': '', 'data-action': 'restore', 'data-generation': String(r.generation),
            'aria-label': `Restore generation ${r.generation}`,
            onclick: (e) => restore(r.generation, e.currentTarget),
          }, 'Restore…') : null))))))),
    h('section', { class: 'panel' }, h('h2', null, 'Compare'),
      h('form', { class: 'inline', id: 'diff-form', onsubmit: (e) => { e.preventDefault(); compare(); } },
        h('label', { for: 'diff-from' }, 'From'), fromSel, h('label', { for: 'diff-to' }, 'to'), toSel,
        h('button', { type: 'submit', class: 'btn small primary' }, 'Show diff')),
      out)));
  // #/revisions/N (an audit entry's "gen N") shows what generation N
  // changed and marks its row.
  const asked = Number(ctx.sub);
  const i = ctx.sub && Number.isInteger(asked) ? gens.indexOf(asked) : -1;
  if (i >= 0) {
    const tr = root.querySelector(`#revisions tr[data-generation="${asked}"]`);
    tr.classList.add('picked');
    tr.setAttribute('aria-current', 'true');
    fromSel.value = String(gens[i + 1] ?? gens[i]); toSel.value = String(asked);
    compare();
    tr.scrollIntoView({ block: 'center' });
  } else {
    if (ctx.sub) root.querySelector('.page-head').append(h('p', { class: 'notice warn', id: 'revision-gone' }, `Generation ${ctx.sub} is not among the kept revisions.`));
    if (gens.length > 1) compare();
  }
}

// listenerChanges lists the listeners (address:port of each bind) that
// going from cur to next closes and opens: a restore (or any document
// swap) can close listeners an operator does not see in a weight diff.
export function listenerChanges(cur, next) {
  const binds = (c) => {
    const m = new Map();
    for (const f of c.frontends || []) for (const b of f.binds || []) m.set(`${b.address}:${b.port}`, `${f.name}/${b.name}`);
    return m;
  };
  const a = binds(cur); const b = binds(next);
  return {
    closes: [...a].filter(([k]) => !b.has(k)).map(([addr, bind]) => ({ addr, bind })),
    opens: [...b].filter(([k]) => !a.has(k)).map(([addr, bind]) => ({ addr, bind })),
  };
}
