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

// threadsOf reads the loops of GET /api/v1/cpu-map (running: granted
// CPUs) or, failing that, the configured cpu_map threads.
function threadsOf(doc) {
  if (!doc) return [];
  const running = Array.isArray(doc.loops) && doc.loops.length ? doc.loops : null;
  const src = running || doc.threads || doc.map || (Array.isArray(doc) ? doc : null);
  if (!src) return [];
  const arr = Array.isArray(src) ? src : Object.entries(src).map(([k, v]) => ({ thread: Number(k), cpus: v }));
  return arr.map((t, i) => ({
    thread: t.thread ?? t.loop ?? t.id ?? i,
    tid: t.tid ?? null,
    state: t.state ?? null,
    configured: t.configured ? cpuList(t.configured) : null,
    cpus: cpuList(t.granted ?? t.cpus ?? t.cpu ?? t.affinity ?? t.mask),
  }));
}

function irqsOf(doc) {
  const src = Array.isArray(doc) ? doc : doc && (doc.irqs || doc.items);
  if (!Array.isArray(src)) return [];
  return src.map((q) => {
    const affinity = cpuList(q.affinity ?? q.cpus ?? q.smp_affinity_list ?? []);
    const effective = cpuList(q.effective ?? []);
    let count = null;
    if (typeof q.total === 'number') count = q.total;
    else if (typeof q.count === 'number') count = q.count;
    else if (q.counts && typeof q.counts === 'object') count = Object.values(q.counts).reduce((a, b) => a + Number(b || 0), 0);
    return {
      irq: q.irq ?? q.id ?? q.number,
      name: q.name ?? q.device ?? q.desc ?? q.description ?? q.nic ?? '',
      chip: q.chip ?? '',
      affinity, effective,
      runs: effective.length ? effective : affinity,
      count,
      managed: q.managed === true,
    };
  });
}

export default async function cpu(ctx, root) {
  const [cfg, map, irqs] = await Promise.all([get('/api/v1/config'), tryGet('/api/v1/cpu-map'), tryGet('/api/v1/irqs')]);
  root.append(h('div', { class: 'page-head' }, h('h1', null, 'CPU map & IRQs'), badge('read only')));

  const threads = map.ok ? threadsOf(map.data) : threadsOf(cfg.cpu_map);
  const irqList = irqs.ok ? irqsOf(irqs.data) : [];
  const pinned = (cfg.irq && cfg.irq.pins) || [];

  // Which CPU runs what: loops on their granted CPUs, IRQs where they are
  // delivered (effective affinity), busiest first.
  const byCPU = new Map();
  const slot = (c) => { if (!byCPU.has(c)) byCPU.set(c, { loops: [], irqs: [] }); return byCPU.get(c); };
  for (const c of cpuList(map.ok && map.data && (map.data.allowed || map.data.online || map.data.cpus))) slot(c);
  for (const t of threads) for (const c of t.cpus) slot(c).loops.push(t);
  for (const q of irqList) for (const c of q.runs) slot(c).irqs.push(q);
  if (!irqs.ok) for (const p of pinned) for (const c of p.cpus) slot(c).irqs.push({ irq: p.irq, name: 'pinned', count: null });
  const cpus = [...byCPU.keys()].sort((a, b) => a - b);

  const mode = (map.ok && map.data && map.data.mode) || (cfg.cpu_map && cfg.cpu_map.mode) || 'none';
  const cpuCard = (c) => {
    const d = byCPU.get(c);
    const busy = [...d.irqs].sort((a, b) => (b.count || 0) - (a.count || 0));
    const total = busy.reduce((a, q) => a + (q.count || 0), 0);
    return h('div', { class: 'cpu', data: { cpu: String(c) } },
      h('b', null, `CPU ${c}`),
      h('div', null, d.loops.length ? d.loops.map((t) => [badge(`loop #${t.thread}`, t.cpus.length === 1 ? 'accent' : ''), ' '])
        : h('span', { class: 'muted' }, 'no loop')),
      h('div', { class: 'what' }, busy.length
        ? [`${busy.length} IRQ${busy.length > 1 ? 's' : ''}${total ? `, ${num(total)} interrupts` : ''}: `,
          busy.slice(0, 3).map((q) => `#${q.irq}${q.name ? ' ' + q.name : ''}`).join(', '), busy.length > 3 ? ' …' : '']
        : 'no IRQ'));
  };
  root.append(h('section', { class: 'panel', id: 'cpu-map' },
    h('h2', null, 'Which CPU runs what'),
    h('div', { class: 'kv' },
      h('span', null, 'CPU map mode ', h('b', null, mode)),
      h('span', null, 'IRQ policy ', h('b', null, (cfg.irq && cfg.irq.policy) || 'none')),
      cfg.irq && cfg.irq.nics && cfg.irq.nics.length ? h('span', null, 'NICs ', h('b', null, cfg.irq.nics.join(', '))) : null),
    map.ok ? null : notAvailable('the running CPU map', '/api/v1/cpu-map'),
    cpus.length ? h('div', { class: 'cpus' }, cpus.map(cpuCard))
      : h('p', { class: 'empty' }, mode === 'none' ? 'Loops are not pinned (cpu_map mode "none"): the kernel schedules them on any CPU.' : 'No pinning known.'),
    threads.length ? h('div', { class: 'tablewrap' }, h('table', { id: 'loops-cpus' },
      h('thead', null, h('tr', null, ['Loop', 'Thread id', 'State', 'Configured CPUs', 'Granted CPUs'].map((x) => h('th', null, x)))),
      h('tbody', null, threads.map((t) => h('tr', null,
        h('td', null, `#${t.thread}`), h('td', { class: 'mono' }, t.tid === null ? '—' : String(t.tid)),
        h('td', null, t.state ? badge(t.state, t.state === 'active' ? 'ok' : 'warn') : '—'),
        h('td', { class: 'mono' }, t.configured && t.configured.length ? t.configured.join(',') : 'any'),
        h('td', { class: 'mono' }, t.cpus.join(',') || '—')))))) : null));

  root.append(h('section', { class: 'panel', id: 'irqs' },
    h('h2', null, 'IRQs'),
    irqs.ok ? (irqList.length ? h('div', { class: 'tablewrap' }, h('table', null,
      h('thead', null, h('tr', null, h('th', null, 'IRQ'), h('th', null, 'Device'), h('th', null, 'Affinity'), h('th', null, 'Runs on'), h('th', { class: 'num' }, 'Count'))),
      h('tbody', null, irqList.map((q) => h('tr', null,
        h('td', null, String(q.irq)),
        h('td', null, h('span', { class: 'mono' }, q.name), q.managed ? [' ', badge('managed')] : null, q.chip ? h('div', { class: 'muted' }, q.chip) : null),
        h('td', { class: 'mono' }, q.affinity.join(',') || '—'),
        h('td', { class: 'mono' }, q.effective.join(',') || '—'),
        h('td', { class: 'num' }, num(q.count)))))))
      : h('p', { class: 'empty' }, 'No IRQ reported.'))
      : [notAvailable('IRQ affinities and counts', '/api/v1/irqs'),
        pinned.length ? h('p', null, 'Configured pins: ', pinned.map((p) => `IRQ ${p.irq} → CPU ${p.cpus.join(',')}`).join('; ')) : null]));
}
