// A frontend's limits per client (stick tables): the panel on its card
// (each limit's thresholds and counters, live, and its top entries on
// demand) and the JSON field of the frontend form.

import { h, clear, modal, num, toast, btn } from '../dom.js';
import { get, request, enc } from '../api.js';
import { cell, statKey, problemText } from '../common.js';
import { textArea } from '../forms.js';

// rateText says a rate threshold: "100 / 10 s".
function rateText(r) {
  if (!r) return null;
  const p = r.period_ms % 1000 === 0 ? `${num(r.period_ms / 1000)} s` : `${num(r.period_ms)} ms`;
  return `${num(r.count)} / ${p}`;
}

// thresholds lists what a limit bounds.
function thresholds(l) {
  const out = [];
  if (l.conn_cur) out.push(`conn_cur ${num(l.conn_cur)}`);
  for (const k of ['conn_rate', 'req_rate', 'err_rate']) {
    if (l[k]) out.push(`${k} ${rateText(l[k])}`);
  }
  return out.join(' · ');
}

// actionText says what happens to a client over the limit.
function actionText(l) {
  const a = l.action === 'tarpit' ? `tarpit ${num(l.tarpit_ms)} ms` : 'deny (429)';
  return `${a} · track ${l.track} · scope ${l.scope}`;
}

// limitsPanel shows the limits of frontend f with their counters (live)
// and a button per limit for its top entries; nothing without limits.
export function limitsPanel(ctx, f) {
  const ls = f.limits || [];
  if (!ls.length) return null;
  return h('div', { 'data-limits': f.name },
    h('h3', null, 'Limits per client ', h('span', { class: 'muted' }, '(this node\'s tables; each node counts its own clients)')),
    h('div', { class: 'tablewrap' }, h('table', { 'aria-label': `Limits of ${f.name}` },
      h('thead', null, h('tr', null, ['Limit', 'Key', 'Thresholds', 'Action', 'Denied', 'Tarpitted', 'Conns refused', 'Clients', '']
        .map((t, i) => h('th', { class: i >= 4 && i <= 7 ? 'num' : '' }, t)))),
      h('tbody', null, ls.map((l) => h('tr', { data: { limit: `${f.name}/${l.name}` } },
        h('td', null, h('b', null, l.name)),
        h('td', { class: 'mono' }, l.key),
        h('td', { class: 'mono' }, thresholds(l)),
        h('td', null, actionText(l)),
        h('td', { class: 'num' }, cell('b', statKey('fe', f.name, `limit-${l.name}-denied`), 'err')),
        h('td', { class: 'num' }, cell('b', statKey('fe', f.name, `limit-${l.name}-tarpitted`), 'err')),
        h('td', { class: 'num' }, cell('b', statKey('fe', f.name, `limit-${l.name}-refused`), 'err')),
        h('td', { class: 'num' }, cell('b', statKey('fe', f.name, `limit-${l.name}-entries`))),
        h('td', null, btn('Top entries', {
          class: 'small', 'data-action': 'limit-entries', 'aria-label': `Top entries of limit ${f.name}/${l.name}`,
        }, () => entriesDialog(ctx, f.name, l)))))))));
}

// entriesDialog shows the clients of limit l of frontend fe with the
// highest counters (GET …/entries), refreshed on demand; an operator may
// forget one (DELETE …/entries/{key}).
function entriesDialog(ctx, fe, l) {
  const path = `/api/v1/frontends/${enc(fe)}/limits/${enc(l.name)}/entries`;
  const canClear = ctx.can('server');
  return modal((close) => {
    const box = h('div', { 'data-limit-entries': `${fe}/${l.name}`, 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
    const load = async () => {
      let t;
      try {
        t = await get(`${path}?limit=50`);
      } catch (e) {
        clear(box).append(h('p', { class: 'err' }, problemText(e)));
        return;
      }
      const rates = ['conn_rate', 'req_rate', 'err_rate'].filter((k) => l[k]);
      clear(box).append(
        h('p', null, `${num(t.entries)} clients tracked of ${num(t.capacity)}`,
          t.untracked ? ` · ${num(t.untracked)} not tracked (table full)` : '',
          t.nodes > 1 ? ` · thresholds divided by ${t.nodes} live nodes` : ''),
        t.top.length ? h('div', { class: 'tablewrap' }, h('table', { 'aria-label': `Top entries of ${fe}/${l.name}` },
          h('thead', null, h('tr', null, ['Client', 'Conns now', ...rates, 'Idle', ''].map((c, i) => h('th', { class: i > 0 ? 'num' : '' }, c)))),
          h('tbody', null, t.top.map((e) => h('tr', { data: { entry: e.key } },
            h('td', { class: 'mono' }, e.key),
            h('td', { class: 'num' }, num(e.conn_cur)),
            ...rates.map((k) => h('td', { class: 'num' }, num(e[k]))),
            h('td', { class: 'num' }, `${num(Math.round(e.idle_ms / 1000))} s`),
            h('td', null, canClear ? btn('Forget', { class: 'small ghost danger', 'data-action': 'forget-entry', 'aria-label': `Forget ${e.key} in ${fe}/${l.name}` }, async (ev) => {
              ev.target.disabled = true;
              try {
                await ctx.writing(() => request('DELETE', `${path}/${enc(e.key)}`));
                toast(`Forgot ${e.key} in ${fe}/${l.name}`);
              } catch (err) {
                toast(problemText(err), 'bad');
              }
              load();
            }) : null)))))) : h('p', { class: 'empty' }, 'No client tracked.'));
    };
    load();
    return h('div', { class: 'body' },
      h('h2', null, `Top entries of ${fe}/${l.name}`),
      h('p', { class: 'hint' }, `Key ${l.key}; ${thresholds(l)}. Rates over each rate's period, as the limit reads them.`),
      box,
      h('div', { class: 'actions' },
        btn('Refresh', { class: 'ghost', 'data-action': 'refresh-entries' }, () => load()),
        btn('Close', { class: 'primary' }, () => close())));
  }, { label: `Top entries of ${fe}/${l.name}`, wide: true });
}

// limitsField edits a frontend's limits as JSON (a list of limits): text
// that does not parse is sent as text, which the API refuses with a
// problem on /limits; the API's problems on /limits/... land on this
// field.
export function limitsField(model) {
  const text = model.limits ? JSON.stringify(model.limits, null, 2) : '';
  const wrap = textArea({ limits: text }, ['limits'], 'Limits per client (JSON)', {
    rows: 6, hint: 'a list of limits (README, "Limits per client"); empty: none',
    placeholder: '[{"name": "per_ip", "key": "src", "req_rate": {"count": 100, "period_ms": 10000}, "conn_cur": 20}]',
  });
  const el = wrap.querySelector('textarea');
  el.classList.add('mono');
  const err = wrap.querySelector('.err');
  el.addEventListener('input', () => {
    const v = el.value.trim();
    err.textContent = '';
    wrap.classList.remove('invalid');
    el.removeAttribute('aria-invalid');
    if (v === '') { delete model.limits; return; }
    try {
      model.limits = JSON.parse(v);
    } catch (e) {
      model.limits = v; // refused by the API, with a problem on /limits
      err.textContent = `not JSON: ${e.message}`;
      wrap.classList.add('invalid');
      el.setAttribute('aria-invalid', 'true');
    }
  });
  return wrap;
}
