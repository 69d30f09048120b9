// Overview: what runs, how busy it is, what is healthy.

import { h, clear, num, bytes, duration, badge } from '../dom.js';
import { get } from '../api.js';
import { cell, statKey, paint, subscribe, notAvailable } from '../common.js';
import { RateChart } from '../chart.js';
import { labelled } from './backends.js';

export default async function overview(ctx, root) {
  const [cfg, info] = await Promise.all([get('/api/v1/config'), get('/api/v1/info').catch(() => ctx.info)]);
  const live = ctx.live;
  const servers = cfg.backends.reduce((a, b) => a + b.servers.length, 0);

  const card = (k, v, attrs = {}) => h('div', { class: 'card' }, h('div', { class: 'k' }, k), h('div', { class: 'v', ...attrs }, v));
  const upCard = h('div', { class: 'v live-v', id: 'servers-up' }, '—');
  const connCard = h('div', { class: 'v live-v', id: 'conns-now' }, '—');

  const traffic = h('div', { class: 'panel', id: 'traffic' });
  const reqEl = h('div', { class: 'chart', id: 'chart-req' });
  const byEl = h('div', { class: 'chart', id: 'chart-bytes' });
  const trafficBody = h('div', { class: 'grid two' },
    h('div', null, h('h3', null, 'Requests / s'), reqEl),
    h('div', null, h('h3', null, 'Bytes / s (in + out)'), byEl));
  traffic.append(h('h2', null, 'Traffic ', h('span', { class: 'badge warn stale-note' }, 'stale')),
    h('p', { class: 'hint' }, 'Since this page opened, up to 5 minutes. Tcp frontends count connections, http frontends requests.'), trafficBody);

  const feTable = h('div', { class: 'tablewrap' });
  const health = h('div', { id: 'health' });
  const loops = h('div', { class: 'tablewrap loops', id: 'loops' });

  root.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Overview')),
    h('div', { class: 'cards' },
      card('Uptime', duration(info && info.uptime_s)),
      card('Generation', num(cfg.generation), { id: 'generation' }),
      card('Loops', num(info && info.nbthread)),
      card('Frontends', num(cfg.frontends.length)),
      card('Backends', num(cfg.backends.length)),
      h('div', { class: 'card' }, h('div', { class: 'k' }, `Servers up (of ${servers})`), upCard),
      h('div', { class: 'card' }, h('div', { class: 'k' }, 'Connections now'), connCard)),
    traffic,
    h('div', { class: 'panel' }, h('h2', null, 'Frontends ', h('span', { class: 'badge warn stale-note' }, 'stale')), feTable),
    h('div', { class: 'panel' }, h('h2', null, 'Health'), health),
    h('div', { class: 'panel' }, h('h2', null, 'Loops ', h('span', { class: 'muted' }, '(show activity)')), loops));

  // Frontends with their live counters.
  if (!cfg.frontends.length) {
    feTable.append(h('p', { class: 'empty' }, 'No frontend yet. ', h('a', { href: '#/frontends' }, 'Create one'), '.'));
  } else {
    feTable.append(labelled(h('table', { id: 'fe-stats', class: 'stack' },
      h('thead', null, h('tr', null, ['Frontend', 'Mode', 'Binds', 'Conns now', 'Conns total', 'Requests', 'Bytes in', 'Bytes out', 'Errors', 'Req/s', 'Bytes/s']
        .map((t, i) => h('th', { class: i > 2 ? 'num' : '' }, t)))),
      h('tbody', null, cfg.frontends.map((f) => h('tr', { data: { frontend: f.name } },
        h('td', null, h('a', { href: '#/frontends' }, f.name)),
        h('td', null, badge(f.mode)),
        h('td', { class: 'mono' }, f.binds.map((b) => `${b.address}:${b.port}`).join(', ') || '—'),
        cell('td', statKey('fe', f.name, 'connCur'), 'num', { class: 'num' }),
        cell('td', statKey('fe', f.name, 'connTotal'), 'num', { class: 'num' }),
        cell('td', statKey('fe', f.name, 'requests'), 'num', { class: 'num' }),
        cell('td', statKey('fe', f.name, 'bytesIn'), 'bytes', { class: 'num' }),
        cell('td', statKey('fe', f.name, 'bytesOut'), 'bytes', { class: 'num' }),
        cell('td', statKey('fe', f.name, 'errors'), 'num', { class: 'num' }),
        cell('td', statKey('fe', f.name, 'req'), 'rate-req', { class: 'num' }),
        cell('td', statKey('fe', f.name, 'bytes'), 'rate-bytes', { class: 'num' })))))));
  }

  let charts = null;
  // The health table is rebuilt only when what it shows changes, so a
  // keyboard user's focus on one of its links survives the stats ticks.
  let healthSig = null;
  const paintHealth = () => {
    const st = live.stats;
    let up = 0; let known = 0; let cur = 0;
    const data = cfg.backends.map((b) => {
      const counts = { up: 0, down: 0, drain: 0, maint: 0 };
      const down = [];
      for (const s of b.servers) {
        const rs = st && st.backends.get(b.name) && st.backends.get(b.name).servers.get(s.name);
        const admin = (rs && rs.admin) || s.admin_state;
        if (admin === 'drain') counts.drain++;
        if (admin === 'maint') counts.maint++;
        if (rs && rs.up !== null) {
          known++;
          if (rs.up) { up++; counts.up++; } else { counts.down++; down.push(s.name); }
        }
      }
      return { name: b.name, n: b.servers.length, counts, down };
    });
    if (st) for (const f of st.frontends.values()) cur += f.connCur || 0;
    upCard.textContent = st && known ? `${up}` : '—';
    upCard.className = 'v live-v ' + (st && known ? (up === known ? 'ok' : up ? 'warn' : 'bad') : '');
    connCard.textContent = st ? num(cur) : '—';
    const sig = JSON.stringify([!!st, live.statsMissing, data]);
    if (sig === healthSig) return;
    healthSig = sig;
    clear(health);
    if (!cfg.backends.length) { health.append(h('p', { class: 'empty' }, 'No backend yet.')); return; }
    health.append(h('div', { class: 'tablewrap' }, h('table', null,
      h('thead', null, h('tr', null, h('th', null, 'Backend'), h('th', { class: 'num' }, 'Servers'), h('th', null, 'State'), h('th', { class: 'hide-sm' }, 'Down'))),
      h('tbody', null, data.map((b) => h('tr', { data: { backend: b.name } },
        h('td', null, h('a', { href: '#/backends' }, b.name)),
        h('td', { class: 'num' }, String(b.n)),
        h('td', null,
          st ? badge(`${b.counts.up} up`, b.counts.up ? 'ok' : '') : badge('health unknown'), ' ',
          b.counts.down ? badge(`${b.counts.down} down`, 'bad') : null, ' ',
          b.counts.drain ? badge(`${b.counts.drain} drain`, 'warn') : null, ' ',
          b.counts.maint ? badge(`${b.counts.maint} maint`, 'warn') : null),
        h('td', { class: 'mono hide-sm' }, b.down.join(', '))))))));
    if (!st && live.statsMissing) health.append(notAvailable('server health', '/api/v1/stats'));
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
      charts = [new RateChart(reqEl, { field: 'req', label: 'Requests per second' }), new RateChart(byEl, { field: 'bytes', label: 'Bytes per second', isBytes: true })];
    }
    charts.forEach((c) => c.update(live.history));
  };

  const paintLoops = () => {
    clear(loops);
    const act = live.activity || (live.stats && live.stats.loops);
    if (!act) {
      loops.append(live.activityMissing ? notAvailable('loop activity', '/api/v1/activity') : h('p', { class: 'muted' }, 'Waiting for activity…'));
      return;
    }
    const maxAvg = Math.max(1, ...act.map((l) => l.avgLoopUs || 0));
    const t = (l) => (l.tasklets ? l.tasklets.map((x) => num(x)).join(' / ') : '—');
    loops.append(h('table', { id: 'loops-table' },
      h('thead', null, h('tr', null, ['Loop', 'Loops', 'Poll I/O', 'Tasklets u/n/b', 'Avg loop', 'Accepted', 'Accq full', 'Splice', 'Pipes'].map((x, i) => h('th', { class: i ? 'num' : '' }, x)))),
      h('tbody', null, act.map((l) => h('tr', null,
        h('td', null, `#${l.id}`),
        h('td', { class: 'num' }, num(l.loops)),
        h('td', { class: 'num' }, num(l.pollIO)),
        h('td', { class: 'num' }, t(l)),
        h('td', { class: 'num' }, h('div', { class: 'inline' }, l.avgLoopUs === null ? '—' : `${num(l.avgLoopUs)} µs`,
          h('div', { class: 'bar', title: 'relative loop time' }, h('i', { style: `width:${Math.round(100 * (l.avgLoopUs || 0) / maxAvg)}%` })))),
        h('td', { class: 'num' }, num(l.accepted)),
        h('td', { class: 'num' }, num(l.accqFull)),
        h('td', { class: 'num' }, bytes(l.spliceBytes)),
        h('td', { class: 'num' }, num(l.pipesUsed)))))));
  };

  const onStats = () => { paint(root, live); paintHealth(); paintTraffic(); if (!live.activity && live.stats && live.stats.loops) paintLoops(); };
  onStats();
  paintLoops();
  const off = subscribe(live, { stats: onStats, activity: paintLoops });
  return () => { off(); if (charts) charts.forEach((c) => c.destroy()); };
}
