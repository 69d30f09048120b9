// Overview: what runs, how busy it is, what is healthy.

import { h, clear, num, bytes, duration, badge, ago, tip } from '../dom.js';
import { get } from '../api.js';
import { cell, statKey, paint, subscribe, notAvailable, checkText } from '../common.js';
import { RateChart } from '../chart.js';
import { labelled, checkSettings } from './backends.js';

export default async function overview(ctx, root) {
  const [cfg, info] = await Promise.all([get('/api/v1/config'), get('/api/v1/info').catch(() => ctx.info)]);
  const live = ctx.live;
  const servers = cfg.backends.reduce((a, b) => a + b.servers.length, 0);

  const card = (k, v, attrs = {}) => h('div', { class: 'card' }, h('div', { class: 'k' }, k), h('div', { class: 'v', ...attrs }, v));
  const upCard = h('div', { class: 'v live-v', id: 'servers-up' }, '—');
  const connCard = h('div', { class: 'v live-v', id: 'conns-now' }, '—');
  const e5Card = h('div', { class: 'v live-v', id: 'total-5xx' }, '—');

  const traffic = h('div', { class: 'panel', id: 'traffic' });
  const reqEl = h('div', { class: 'chart', id: 'chart-req' });
  const e5El = h('div', { class: 'chart', id: 'chart-5xx' });
  const byEl = h('div', { class: 'chart', id: 'chart-bytes' });
  const trafficBody = h('div', null, h('div', { class: 'grid two' },
    h('div', null, h('h3', null, 'Requests / s'), reqEl),
    h('div', null, h('h3', null, '5xx responses / s'), e5El)),
  h('div', null, h('h3', null, 'Bytes / s (in + out)'), byEl));
  traffic.append(h('h2', null, 'Traffic ', h('span', { class: 'badge warn stale-note' }, 'stale')),
    h('p', { class: 'hint' }, 'Since this page opened, up to 5 minutes. Tcp frontends count connections, http frontends requests.'), trafficBody);

  const feTable = h('div', { class: 'tablewrap' });
  const beTable = h('div', { class: 'tablewrap' });
  const health = h('div', { id: 'health' });
  const loops = h('div', { class: 'tablewrap loops', id: 'loops' });

  root.append(h('div', { class: 'page-head' }, h('h1', null, 'Overview')));
  if (!cfg.frontends.length) root.append(firstVisit(ctx, cfg.backends.length > 0));
  root.append(
    h('div', { class: 'cards' },
      card('Uptime', duration(info && info.uptime_s)),
      card('Generation', num(cfg.generation), { id: 'generation' }),
      card('Loops', num(info && info.nbthread)),
      card('Frontends', num(cfg.frontends.length)),
      card('Backends', num(cfg.backends.length)),
      h('div', { class: 'card' }, h('div', { class: 'k' }, `Servers up (of ${servers})`), upCard),
      h('div', { class: 'card' }, h('div', { class: 'k' }, 'Connections now'), connCard),
      h('div', { class: 'card' }, h('div', { class: 'k' }, '5xx responses'), e5Card)),
    traffic,
    h('div', { class: 'panel' }, h('h2', null, 'Frontends ', h('span', { class: 'badge warn stale-note' }, 'stale')), feTable),
    h('div', { class: 'panel' }, h('h2', null, 'Backends ', h('span', { class: 'badge warn stale-note' }, 'stale')), beTable),
    h('div', { class: 'panel' }, h('h2', null, 'Health'), health),
    h('div', { class: 'panel' }, h('h2', null, 'Loops ', h('span', { class: 'muted' }, '(show activity)')), loops));

  // Frontends with their live counters, responses by status class.
  const nc = (k, fmt = 'num') => cell('td', k, fmt, { class: 'num' });
  // classes are the cells of the responses by status class of an object
  // (kind fe or be), the 5xx in red when not zero.
  // A tcp frontend or backend has no responses: dashes.
  const classes = (kind, name, tcp) => ['2xx', '3xx', '4xx', '5xx'].map((c) => (tcp ? h('td', { class: 'num muted' }, '—')
    : nc(statKey(kind, name, 's' + c), c === '5xx' ? 'err' : 'num')));
  if (!cfg.frontends.length) {
    feTable.append(h('p', { class: 'empty' }, 'No frontend yet. ', h('a', { href: '#/frontends/new' }, 'Create one'), '.'));
  } else {
    feTable.append(labelled(h('table', { id: 'fe-stats', class: 'stack' },
      h('thead', null, h('tr', null, ['Frontend', 'Mode', 'Binds', 'Conns total', 'Requests', '2xx', '3xx', '4xx', '5xx', 'Errors', 'Req/s', '5xx/s', 'Bytes in', 'Bytes out']
        .map((t, i) => h('th', { class: i > 2 ? 'num' : '' }, t)))),
      h('tbody', null, cfg.frontends.map((f) => h('tr', { data: { frontend: f.name } },
        h('td', null, h('a', { href: '#/frontends' }, f.name)),
        h('td', null, badge(f.mode)),
        h('td', { class: 'mono' }, f.binds.map((b) => `${b.address}:${b.port}`).join(', ') || '—'),
        nc(statKey('fe', f.name, 'connTotal')),
        nc(statKey('fe', f.name, 'requests')),
        classes('fe', f.name, f.mode === 'tcp'),
        nc(statKey('fe', f.name, 'errors'), 'err'),
        nc(statKey('fe', f.name, 'req'), 'rate-req'),
        nc(statKey('fe', f.name, 'e5'), 'rate-e5'),
        nc(statKey('fe', f.name, 'bytesIn'), 'bytes'),
        nc(statKey('fe', f.name, 'bytesOut'), 'bytes')))))));
  }

  // Backends: state (red without a usable server), responses by class and
  // why connections failed.
  const stateCells = new Map();
  if (!cfg.backends.length) {
    beTable.append(h('p', { class: 'empty' }, 'No backend yet. ', h('a', { href: '#/backends/new' }, 'Create one'), '.'));
  } else {
    beTable.append(labelled(h('table', { id: 'be-stats', class: 'stack' },
      h('thead', null, h('tr', null, ['Backend', 'State', '2xx', '3xx', '4xx', '5xx', 'No server', 'Connect errors', 'Retries', 'Queue']
        .map((t, i) => h('th', { class: i > 1 ? 'num' : '' }, t)))),
      h('tbody', null, cfg.backends.map((b) => {
        const sc = h('td', { class: 'be-state' }, '—');
        stateCells.set(b.name, sc);
        return h('tr', { data: { backend: b.name } },
          h('td', null, h('a', { href: '#/backends' }, b.name)),
          sc,
          classes('be', b.name, b.mode === 'tcp'),
          nc(statKey('be', b.name, 'noServer'), 'err'),
          nc(statKey('be', b.name, 'connectErrors'), 'err'),
          nc(statKey('be', b.name, 'retries'), 'err'),
          nc(statKey('be', b.name, 'queue'), 'err'));
      })))));
  }

  let charts = null;
  // The health panel is rebuilt only when what it shows changes, so a
  // keyboard user's focus on one of its links survives the stats ticks.
  let healthSig = null;
  const paintHealth = () => {
    const st = live.stats;
    let up = 0; let known = 0; let cur = 0; let e5 = null;
    const down = []; // [{backend, server, check, admin}]
    const data = cfg.backends.map((b) => {
      const rb = st && st.backends.get(b.name);
      const counts = { up: 0, down: 0, drain: 0, maint: 0, nocheck: 0 };
      for (const s of b.servers) {
        const rs = rb && rb.servers.get(s.name);
        const admin = (rs && rs.admin) || s.admin_state;
        if (admin === 'drain') counts.drain++;
        if (admin === 'maint') counts.maint++;
        if (rs && rs.up !== null) {
          known++;
          if (rs.up) { up++; counts.up++; if (!b.health_check) counts.nocheck++; } else {
            counts.down++;
            down.push({ backend: b.name, server: s.name, check: rs.check, hc: b.health_check, admin });
          }
        }
      }
      const state = rb && rb.state ? rb.state : null;
      return { name: b.name, n: b.servers.length, counts, state, serversUp: rb ? rb.serversUp : null };
    });
    if (st) {
      for (const f of st.frontends.values()) { cur += f.connCur || 0; if (f.s5xx !== null) e5 = (e5 || 0) + f.s5xx; }
    }
    upCard.textContent = st && known ? `${up}` : '—';
    upCard.className = 'v live-v ' + (st && known ? (up === known ? 'ok' : up ? 'warn' : 'bad') : '');
    connCard.textContent = st ? num(cur) : '—';
    e5Card.textContent = st && e5 !== null ? num(e5) : '—';
    e5Card.className = 'v live-v ' + (e5 ? 'bad' : '');
    // Each backend's state: red when no server is usable.
    for (const b of data) {
      const td = stateCells.get(b.name);
      if (!td) continue;
      const sig = JSON.stringify([b.state, b.serversUp, b.counts]);
      if (td.dataset.sig === sig) continue;
      td.dataset.sig = sig;
      const tr = td.parentElement;
      tr.classList.toggle('down', b.state === 'down');
      td.replaceChildren(h('span', { class: 'badges' }, ...[
        b.state === 'down' ? badge(b.n ? 'DOWN: no usable server' : 'DOWN: no server', 'bad')
          : b.state ? badge(`${b.serversUp ?? b.counts.up} of ${b.n} usable`, b.counts.down || b.counts.drain || b.counts.maint ? 'warn' : 'ok') : badge('unknown'),
        ' ', b.counts.down ? badge(`${b.counts.down} down`, 'bad') : null,
        ' ', b.counts.drain ? badge(`${b.counts.drain} drain`, 'warn') : null,
        ' ', b.counts.maint ? badge(`${b.counts.maint} maint`, 'warn') : null,
        ' ', b.counts.nocheck ? badge(`${b.counts.nocheck} no check`) : null].filter((x) => x !== null)));
    }
    const sig = JSON.stringify([!!st, live.statsMissing, data.map((b) => [b.name, b.state, b.counts.drain, b.counts.maint]), down.map((d) => [d.backend, d.server, d.admin, d.check && d.check.status, d.check && d.check.code, d.check && d.check.reason, d.check && d.check.since])]);
    if (sig === healthSig) return;
    healthSig = sig;
    clear(health);
    if (!cfg.backends.length) { health.append(h('p', { class: 'empty' }, 'No backend yet.')); return; }
    if (!st) {
      health.append(live.statsMissing ? notAvailable('server health', '/api/v1/stats') : h('p', { class: 'muted' }, 'Waiting for statistics…'));
      return;
    }
    const dead = data.filter((b) => b.state === 'down');
    // Health and admin state are two facts: "all up" speaks of the
    // health only, and the servers an operator took out (drain, maint)
    // are counted beside it, never taken for healthy or down.
    const drained = data.reduce((a, b) => a + b.counts.drain, 0);
    const maint = data.reduce((a, b) => a + b.counts.maint, 0);
    const adminNote = drained || maint ? h('span', { id: 'admin-out' }, ' ',
      drained ? badge(`${drained} drain`, 'warn') : null, drained && maint ? ' ' : null,
      maint ? badge(`${maint} maint`, 'warn') : null,
      ` Admin state: ${[drained ? `${drained} draining (no new connection)` : '', maint ? `${maint} in maintenance (no traffic)` : ''].filter(Boolean).join(', ')}.`) : null;
    if (!down.length && !dead.length) {
      health.append(h('p', { class: 'ok-line' }, badge('all up', 'ok'), ' Every backend has a usable server; no checked server is down.', adminNote));
      return;
    }
    if (dead.length) {
      health.append(h('p', { class: 'notice bad', role: 'status', id: 'backends-down' },
        h('b', null, `No usable server in ${dead.map((b) => b.name).join(', ')}`),
        ': their clients get 503 Service Unavailable.'));
    }
    if (down.length) {
      health.append(h('div', { class: 'tablewrap' }, labelled(h('table', { id: 'down-list', class: 'stack' },
        h('thead', null, h('tr', null, ['Down', 'Admin state', 'Last check', 'Since', 'Check'].map((t) => h('th', null, t)))),
        h('tbody', null, down.map((d) => h('tr', { data: { server: `${d.backend}/${d.server}` } },
          h('td', null, h('a', { href: '#/backends' }, `${d.backend}/${d.server}`), ' ', badge('down', 'bad')),
          h('td', { class: 'admin' }, badge(d.admin || 'ready', d.admin && d.admin !== 'ready' ? 'warn' : '')),
          h('td', { class: 'check-why' }, d.check ? checkText(d.check) : '—'),
          h('td', { data: d.check && d.check.since ? { since: d.check.since } : {} }, d.check && d.check.since ? ago(d.check.since) : '—'),
          h('td', { class: 'muted' }, checkSettings(d.hc)))))))));
    }
    if (adminNote) health.append(h('p', null, adminNote));
  };

  const paintTraffic = () => {
    if (live.statsMissing && !live.stats) {
      if (!traffic.querySelector('[data-na]')) { trafficBody.hidden = true; traffic.append(notAvailable('traffic statistics', '/api/v1/stats')); }
      return;
    }
    trafficBody.hidden = false;
    const na = traffic.querySelector('[data-na]');
    if (na) na.remove();
    if (!charts) {
      charts = [new RateChart(reqEl, { field: 'req', label: 'Requests per second' }),
        new RateChart(e5El, { field: 'e5', label: '5xx responses per second' }),
        new RateChart(byEl, { field: 'bytes', label: 'Bytes per second', isBytes: true })];
    }
    charts.forEach((c) => c.update(live.history));
  };

  // The loop table's head is built once: a redraw every second must not
  // take the focus (and its explanation) from a heading.
  let loopsBody = null;
  const paintLoops = () => {
    const act = live.activity || (live.stats && live.stats.loops);
    if (!act || !loopsBody || !loopsBody.isConnected) { clear(loops); loopsBody = null; }
    if (!act) {
      loops.append(live.activityMissing ? notAvailable('loop activity', '/api/v1/activity') : h('p', { class: 'muted' }, 'Waiting for activity…'));
      return;
    }
    const maxAvg = Math.max(1, ...act.map((l) => l.avgLoopUs || 0));
    const t = (l) => (l.tasklets ? l.tasklets.map((x) => num(x)).join(' / ') : '—');
    const sh = (l) => (l.shares ? l.shares.map((x) => `${Math.round(x)}%`).join(' / ') : '—');
    const ms = (ns) => (ns === null || ns === undefined ? '—' : `${num(Math.round(ns / 1e6))} ms`);
    if (!loopsBody) {
      loopsBody = h('tbody');
      loops.append(h('table', { id: 'loops-table' },
        h('thead', null, h('tr', null, LOOP_COLUMNS.map(([x, why], i) => h('th', { class: i ? 'num' : '' }, why ? tip(x, why) : x)))),
        loopsBody));
    }
    loopsBody.replaceChildren(...act.map((l) => h('tr', null,
        h('td', null, `#${l.id}`),
        h('td', { class: 'num' }, num(l.loops)),
        h('td', { class: 'num' }, num(l.pollIO)),
        h('td', { class: 'num' }, t(l)),
        h('td', { class: 'num', 'data-col': 'shares' }, sh(l)),
        h('td', { class: 'num' }, ms(l.handshakeNs)),
        h('td', { class: 'num' }, h('div', { class: 'inline' }, l.avgLoopUs === null ? '—' : `${num(l.avgLoopUs)} µs`,
          h('div', { class: 'bar', title: 'relative loop time' }, h('i', { style: `width:${Math.round(100 * (l.avgLoopUs || 0) / maxAvg)}%` })))),
        h('td', { class: 'num' }, num(l.accepted)),
        h('td', { class: 'num' }, num(l.accqFull)),
        h('td', { class: 'num' }, bytes(l.spliceBytes)),
        h('td', { class: 'num' }, num(l.pipesUsed)))));
  };

  // The "since" of the down servers moves on with the clock.
  const paintSince = () => health.querySelectorAll('[data-since]').forEach((el) => {
    const t = ago(el.dataset.since);
    if (el.textContent !== t) el.textContent = t;
  });
  const onStats = () => { paint(root, live); paintHealth(); paintSince(); paintTraffic(); if (!live.activity && live.stats && live.stats.loops) paintLoops(); };
  onStats();
  paintLoops();
  const off = subscribe(live, { stats: onStats, activity: paintLoops, clock: paintSince });
  return () => { off(); if (charts) charts.forEach((c) => c.destroy()); };
}

// LOOP_COLUMNS are the loop table's headings and what each one means
// (HAProxy's "show activity" words, explained on hover and focus).
const LOOP_COLUMNS = [
  ['Loop', 'the loop thread\'s number'],
  ['Loops', 'rounds of the event loop since start'],
  ['Poll I/O', 'rounds in which epoll returned I/O events'],
  ['Tasklets u/n/b', 'units of work run per class: urgent (I/O wake-ups, accepted connections) / normal (timers, control messages, requests) / bulk (transfers that used their per-round byte cap)'],
  ['CPU u/n/b', 'share of the loop\'s time spent in each class since start (seed 000\'s TC0/TC1/TC2)'],
  ['Handshakes', 'time this loop\'s TLS handshakes computed, on their helper goroutines (outside the classes)'],
  ['Avg loop', 'average time of one round of the loop'],
  ['Accepted', 'connections this loop accepted'],
  ['Accq full', 'accepted connections kept by this loop because the target loop\'s accept queue (ring) was full'],
  ['Splice', 'bytes moved with splice(2), kernel to kernel'],
  ['Pipes', 'pipes of the pipe pool in use'],
];

// firstVisit is the guide of an install without frontend: a backend
// first (where connections go), then a frontend (where they come in).
function firstVisit(ctx, haveBackend) {
  const admin = ctx.can('admin');
  const step = (id, href, label, text, done) => h('li', { class: done ? 'done' : '' },
    admin ? h('a', { href, id }, label) : h('b', null, label), text,
    done ? [' ', badge('done', 'ok')] : null);
  return h('section', { class: 'panel guide', id: 'first-visit', 'aria-label': 'Getting started' },
    h('h2', null, 'Getting started'),
    h('p', null, haveBackend ? 'No frontend yet: nothing listens for clients.' : 'Nothing is configured yet. Two steps make spliced forward traffic:'),
    h('ol', null,
      step('guide-backend', '#/backends/new', 'Create a backend', ': a pool of servers (address and port of each), with an optional health check.', haveBackend),
      step('guide-frontend', '#/frontends/new', 'Create a frontend', ': the address and port clients connect to, and the backend they are sent to.', false)),
    admin ? null : h('p', { class: 'muted' }, 'Your token cannot change the configuration: ask an admin.'));
}
