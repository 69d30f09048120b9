// CPU map and IRQs: which CPU runs which loop and which interrupts. Read
// only on this page; the API (PUT /api/v1/cpu-map, /api/v1/irqs/{irq})
// changes them.

import { h, badge, num } from '../dom.js';
import { get, tryGet } from '../api.js';
import { notAvailable } from '../common.js';

function cpuList(v) {
  if (Array.isArray(v)) return v.map(Number).filter((x) => Number.isFinite(x));
  if (typeof v === 'number') return [v];
  if (typeof v === 'string') {
    // "0-3,6" cpulist syntax
    const out = [];
    for (const part of v.split(',')) {
      const [a, b] = part.trim().split('-').map(Number);
      if (Number.isFinite(a)) for (let i = a; i <= (Number.isFinite(b) ? b : a); i++) out.push(i);
    }
    return out;
  }
  return [];
}

function threadsOf(doc) {
  const src = doc && (doc.threads || doc.loops || doc.map || (Array.isArray(doc) ? doc : null));
  if (!src) return [];
  const arr = Array.isArray(src) ? src : Object.entries(src).map(([k, v]) => ({ thread: Number(k), cpus: v }));
  return arr.map((t, i) => ({
    thread: t.thread ?? t.loop ?? t.id ?? i,
    cpus: cpuList(t.cpus ?? t.cpu ?? t.granted ?? t.affinity ?? t.mask),
  }));
}

function irqsOf(doc) {
  const src = Array.isArray(doc) ? doc : doc && (doc.irqs || doc.items);
  if (!Array.isArray(src)) return [];
  return src.map((q) => ({
    irq: q.irq ?? q.id ?? q.number,
    name: q.name ?? q.device ?? q.desc ?? q.description ?? q.nic ?? '',
    cpus: cpuList(q.cpus ?? q.affinity ?? q.smp_affinity_list ?? q.effective ?? []),
    count: typeof q.count === 'number' ? q.count : (Array.isArray(q.counts) ? q.counts.reduce((a, b) => a + Number(b || 0), 0) : (q.total ?? null)),
    managed: q.managed === true,
  }));
}

export default async function cpu(ctx, root) {
  const [cfg, map, irqs] = await Promise.all([get('/api/v1/config'), tryGet('/api/v1/cpu-map'), tryGet('/api/v1/irqs')]);
  root.append(h('div', { class: 'page-head' }, h('h1', null, 'CPU map & IRQs'), badge('read only')));

  const threads = map.ok ? threadsOf(map.data) : threadsOf(cfg.cpu_map);
  const irqList = irqs.ok ? irqsOf(irqs.data) : [];
  const pinned = (cfg.irq && cfg.irq.pins) || [];

  // Which CPU runs what.
  const byCPU = new Map();
  const add = (c, what) => { if (!byCPU.has(c)) byCPU.set(c, []); byCPU.get(c).push(what); };
  for (const t of threads) for (const c of t.cpus) add(c, `loop #${t.thread}`);
  for (const q of irqList) for (const c of q.cpus) add(c, `IRQ ${q.irq}${q.name ? ' ' + q.name : ''}`);
  if (!irqs.ok) for (const p of pinned) for (const c of p.cpus) add(c, `IRQ ${p.irq} (pinned)`);
  const online = map.ok && map.data && (map.data.online || map.data.cpus_online || map.data.cpus);
  for (const c of cpuList(online)) if (!byCPU.has(c)) byCPU.set(c, []);
  const cpus = [...byCPU.keys()].sort((a, b) => a - b);

  const mode = (map.ok && map.data && map.data.mode) || (cfg.cpu_map && cfg.cpu_map.mode) || 'none';
  root.append(h('section', { class: 'panel', id: 'cpu-map' },
    h('h2', null, 'Which CPU runs what'),
    h('div', { class: 'kv' },
      h('span', null, 'CPU map mode ', h('b', null, mode)),
      h('span', null, 'IRQ policy ', h('b', null, (cfg.irq && cfg.irq.policy) || 'none')),
      cfg.irq && cfg.irq.nics && cfg.irq.nics.length ? h('span', null, 'NICs ', h('b', null, cfg.irq.nics.join(', '))) : null),
    map.ok ? null : notAvailable('the running CPU map', '/api/v1/cpu-map'),
    cpus.length ? h('div', { class: 'cpus' }, cpus.map((c) => h('div', { class: 'cpu' },
      h('b', null, `CPU ${c}`),
      h('div', { class: 'what' }, byCPU.get(c).length ? byCPU.get(c).join(', ') : 'idle / unpinned'))))
      : h('p', { class: 'empty' }, mode === 'none' ? 'Loops are not pinned (cpu_map mode "none"): the kernel schedules them on any CPU.' : 'No pinning known.')));

  root.append(h('section', { class: 'panel', id: 'irqs' },
    h('h2', null, 'IRQs'),
    irqs.ok ? (irqList.length ? h('div', { class: 'tablewrap' }, h('table', null,
      h('thead', null, h('tr', null, h('th', null, 'IRQ'), h('th', null, 'Device'), h('th', null, 'CPUs'), h('th', { class: 'num' }, 'Count'))),
      h('tbody', null, irqList.map((q) => h('tr', null,
        h('td', null, String(q.irq)), h('td', { class: 'mono' }, q.name, q.managed ? [' ', badge('managed')] : null),
        h('td', { class: 'mono' }, q.cpus.join(',') || '—'), h('td', { class: 'num' }, num(q.count)))))))
      : h('p', { class: 'empty' }, 'No IRQ reported.'))
      : [notAvailable('IRQ affinities and counts', '/api/v1/irqs'),
        pinned.length ? h('p', null, 'Configured pins: ', pinned.map((p) => `IRQ ${p.irq} → CPU ${p.cpus.join(',')}`).join('; ')) : null]));
}
