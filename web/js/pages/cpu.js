// CPU map and IRQs: which CPU runs which loop and which interrupts, live.
// The IRQ counts are read again every 2 s: the rates (interrupts per
// second, per CPU and per IRQ) come from the last two reads. Admins pin a
// loop (PUT /api/v1/cpu-map) or an IRQ (PUT /api/v1/irqs/{irq}) from here:
// the dialog shows the API's dry-run plan first and applies only that.

import { h, clear, badge, num, rate, modal, btn, planList, when } from '../dom.js';
import { get, tryGet, request, enc, ApiError } from '../api.js';
import { notAvailable, writeToast } from '../common.js';

const POLL_MS = 2000;

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

// parseCPUs reads what an admin typed ("0,2-3"): the CPU ids, or null
// when the text is not a CPU list.
function parseCPUs(text) {
  const t = text.trim();
  if (!t) return [];
  if (!/^\d+(-\d+)?(\s*,\s*\d+(-\d+)?)*$/.test(t)) return null;
  const l = cpuList(t);
  return [...new Set(l)].sort((a, b) => a - b);
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
      name: q.name ?? q.device ?? q.desc ?? q.description ?? '',
      nic: q.nic || '',
      chip: q.chip ?? '',
      affinity, effective,
      runs: effective.length ? effective : affinity,
      count,
      counts: q.counts && typeof q.counts === 'object' ? q.counts : {},
      managed: q.managed === true,
      pinned: Array.isArray(q.pinned) ? q.pinned : null,
    };
  });
}

// rates compares two reads of the IRQs: interrupts per second for each IRQ
// and for each CPU (from the per-CPU counts), or null before a second read.
function rates(prev, cur, dt) {
  const perIRQ = new Map(); const perCPU = new Map();
  if (!prev || !(dt > 0)) return { perIRQ, perCPU };
  const old = new Map(prev.map((q) => [q.irq, q]));
  for (const q of cur) {
    const p = old.get(q.irq);
    if (!p) continue;
    if (q.count !== null && p.count !== null && q.count >= p.count) perIRQ.set(q.irq, (q.count - p.count) / dt);
    for (const [c, v] of Object.entries(q.counts)) {
      const d = Number(v) - Number(p.counts[c] ?? v);
      if (d >= 0) perCPU.set(Number(c), (perCPU.get(Number(c)) || 0) + d / dt);
    }
  }
  return { perIRQ, perCPU };
}

// planDialog asks for one value (control: an input or a select whose
// value read() turns into what send takes, or null with bad set), shows
// the plan of a dry run of exactly that, and applies it on request.
// send(value, dry) makes the write. Resolves the write's answer once
// applied, else a false value.
function planDialog(ctx, { title, label, control, hint, bad, read, send }) {
  return modal((close) => {
    control.id = 'pin-value';
    control.setAttribute('aria-describedby', 'pin-hint pin-err');
    const err = h('div', { class: 'err', id: 'pin-err', role: 'alert' });
    const out = h('div', { id: 'pin-plan', 'aria-live': 'polite' });
    const applyBtn = btn('Apply', { class: 'primary', id: 'pin-apply', disabled: true });
    let planned = null; // the control's value the plan shown is for
    const reset = () => { planned = null; applyBtn.disabled = true; clear(out); };
    const fail = (e) => { err.textContent = e instanceof ApiError ? `${e.status}: ${e.message}` : e.message; };
    const preview = async () => {
      const v = read(control.value);
      err.textContent = '';
      if (v === null) { err.textContent = bad; control.focus(); return; }
      clear(out).append(h('p', { class: 'muted' }, 'Asking for the plan…'));
      try {
        const r = await send(v, true);
        clear(out).append(h('h3', null, 'Plan (dry run: nothing changed yet)'), planList(r.data && r.data.plan));
        planned = control.value;
        applyBtn.disabled = false;
        applyBtn.focus();
      } catch (e) {
        clear(out);
        fail(e);
      }
    };
    applyBtn.addEventListener('click', async () => {
      if (planned !== control.value) { reset(); return; }
      applyBtn.disabled = true;
      try {
        close(await ctx.writing(() => send(read(control.value), false)));
      } catch (e) {
        fail(e);
        applyBtn.disabled = false;
      }
    });
    control.addEventListener('input', reset);
    control.addEventListener('change', reset);
    return h('form', { class: 'pinbox', onsubmit: (e) => { e.preventDefault(); preview(); } },
      h('h2', null, title),
      h('div', { class: 'field' }, h('label', { for: 'pin-value' }, label), control, h('div', { class: 'hint', id: 'pin-hint' }, hint), err),
      out,
      h('div', { class: 'actions' },
        btn('Cancel', { class: 'ghost' }, () => close(false)),
        h('button', { type: 'submit', class: 'btn', id: 'pin-preview' }, 'Show plan'),
        applyBtn));
  }, { label: title });
}

// pinDialog is planDialog for the CPUs of a loop or an IRQ.
function pinDialog(ctx, { title, what, initial, allowEmpty, send }) {
  return planDialog(ctx, {
    title, label: `CPUs for ${what}`, send,
    control: h('input', { type: 'text', value: initial, autocomplete: 'off', spellcheck: 'false', placeholder: '0,2-3' }),
    hint: allowEmpty ? 'Comma-separated ids or ranges; empty removes the pin.' : 'Comma-separated ids or ranges.',
    bad: 'Enter CPU ids such as 0,2-3.',
    read: (text) => { const c = parseCPUs(text); return c === null || (!c.length && !allowEmpty) ? null : c; },
  });
}

export default async function cpu(ctx, root) {
  const [cfg, map, irqs] = await Promise.all([get('/api/v1/config'), tryGet('/api/v1/cpu-map'), tryGet('/api/v1/irqs')]);
  const canPin = ctx.can('admin');
  root.append(h('div', { class: 'page-head' }, h('h1', null, 'CPU map & IRQs'), canPin ? null : badge('read only')));

  const threads = map.ok ? threadsOf(map.data) : threadsOf(cfg.cpu_map);
  let irqList = irqs.ok ? irqsOf(irqs.data) : [];
  const pinned = (cfg.irq && cfg.irq.pins) || [];
  const cfgThreads = (cfg.cpu_map && cfg.cpu_map.threads) || [];

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
    return h('div', { class: 'cpu', data: { cpu: String(c) } },
      h('b', null, `CPU ${c}`),
      h('div', null, d.loops.length ? d.loops.map((t) => [badge(`loop #${t.thread}`, t.cpus.length === 1 ? 'accent' : ''), ' '])
        : h('span', { class: 'muted' }, 'no loop')),
      irqs.ok ? h('div', { class: 'rate' }, h('b', { data: { cpuRate: String(c) } }, '…'), ' interrupts/s') : null,
      h('div', { class: 'what' }, busy.length
        ? [`${busy.length} IRQ${busy.length > 1 ? 's' : ''}: `,
          busy.slice(0, 3).map((q) => `#${q.irq}${q.nic ? ' ' + q.nic : q.name ? ' ' + q.name : ''}`).join(', '), busy.length > 3 ? ' …' : '']
        : 'no IRQ'));
  };

  const pinLoop = async (t, button) => {
    const cur = cfgThreads.find((x) => x.thread === t.thread);
    const ok = await pinDialog(ctx, {
      title: `Pin loop #${t.thread}`, what: `loop #${t.thread}`, initial: cur ? cur.cpus.join(',') : t.cpus.join(','), allowEmpty: true,
      send: (cpus, dry) => {
        const rest = cfgThreads.filter((x) => x.thread !== t.thread);
        const list = cpus.length ? [...rest, { thread: t.thread, cpus }].sort((a, b) => a.thread - b.thread) : rest;
        const body = list.length ? { mode: 'manual', threads: list } : { mode: 'none' };
        return request('PUT', '/api/v1/cpu-map' + (dry ? '?dry_run=true' : ''), body);
      },
    });
    if (ok) { writeToast(ok, `Loop #${t.thread} pinned`); await ctx.refresh(`button[data-action="pin-loop"][data-thread="${t.thread}"]`); } else if (button.isConnected) button.focus();
  };
  const pinIRQ = async (q, button) => {
    const ok = await pinDialog(ctx, {
      title: `Pin IRQ ${q.irq}`, what: `IRQ ${q.irq}${q.nic ? ' (' + q.nic + ')' : ''}`, initial: (q.pinned || q.affinity).join(','), allowEmpty: false,
      send: (cpus, dry) => request('PUT', `/api/v1/irqs/${enc(q.irq)}` + (dry ? '?dry_run=true' : ''), { cpus }),
    });
    if (ok) { writeToast(ok, `IRQ ${q.irq} pinned`); await ctx.refresh(`button[data-action="pin-irq"][data-irq="${q.irq}"]`); } else if (button.isConnected) button.focus();
  };

  // The map's mode: none or auto here (manual: pin a loop below).
  const setMode = async (button) => {
    const ok = await planDialog(ctx, {
      title: 'CPU map mode', label: 'Mode', bad: 'Choose a mode.',
      control: h('select', null, ['none', 'auto'].map((m) => h('option', { value: m, selected: m === mode }, m))),
      hint: 'none: loops keep the process\'s CPUs; auto: loop i on the i-th allowed CPU. Pin a loop below for a manual map.',
      read: (v) => (v === 'none' || v === 'auto' ? v : null),
      send: (m, dry) => request('PUT', '/api/v1/cpu-map' + (dry ? '?dry_run=true' : ''), { mode: m }),
    });
    if (ok) { writeToast(ok, 'CPU map mode changed'); await ctx.refresh('#cpu-mode'); } else if (button.isConnected) button.focus();
  };
  root.append(h('section', { class: 'panel', id: 'cpu-map' },
    h('h2', null, 'Which CPU runs what'),
    h('div', { class: 'kv' },
      h('span', null, 'CPU map mode ', h('b', null, mode),
        canPin && map.ok ? [' ', h('button', { type: 'button', class: 'btn small', id: 'cpu-mode', 'data-write': '', onclick: (e) => setMode(e.currentTarget) }, 'Change…')] : null),
      h('span', null, 'IRQ policy ', h('b', null, (cfg.irq && cfg.irq.policy) || 'none')),
      cfg.irq && cfg.irq.nics && cfg.irq.nics.length ? h('span', null, 'NICs ', h('b', null, cfg.irq.nics.join(', '))) : null),
    map.ok ? null : notAvailable('the running CPU map', '/api/v1/cpu-map'),
    cpus.length ? h('div', { class: 'cpus' }, cpus.map(cpuCard))
      : h('p', { class: 'empty' }, mode === 'none' ? 'Loops are not pinned (cpu_map mode "none"): the kernel schedules them on any CPU.' : 'No pinning known.'),
    threads.length ? h('table', { id: 'loops-cpus', class: 'stack' },
      h('thead', null, h('tr', null, ['Loop', 'Thread id', 'State', 'Configured CPUs', 'Granted CPUs', ...(canPin && map.ok ? [''] : [])].map((x) => h('th', null, x)))),
      h('tbody', null, threads.map((t) => h('tr', { data: { thread: String(t.thread) } },
        h('td', { 'data-label': 'Loop', class: 'first' }, `#${t.thread}`), h('td', { 'data-label': 'Thread id', class: 'mono' }, t.tid === null ? '—' : String(t.tid)),
        h('td', { 'data-label': 'State' }, t.state ? badge(t.state, t.state === 'active' ? 'ok' : 'warn') : '—'),
        h('td', { 'data-label': 'Configured CPUs', class: 'mono' }, t.configured && t.configured.length ? t.configured.join(',') : 'any'),
        h('td', { 'data-label': 'Granted CPUs', class: 'mono' }, t.cpus.join(',') || '—'),
        canPin && map.ok ? h('td', { 'data-label': '', class: 'num' }, h('button', {
          type: 'button', class: 'btn small', 'data-write': '', 'data-action': 'pin-loop', 'data-thread': String(t.thread),
          'aria-label': `Pin loop ${t.thread} to CPUs`, onclick: (e) => pinLoop(t, e.currentTarget),
        }, 'Pin…')) : null)))) : null));

  const nicCount = irqList.filter((q) => q.nic).length;
  const nicBox = h('input', { type: 'checkbox', id: 'irq-nic-only', checked: nicCount > 0 });
  const updated = h('span', { class: 'muted', id: 'irq-updated', 'aria-live': 'off' });
  const noNIC = h('p', { class: 'empty', id: 'irq-no-nic', hidden: true }, 'No IRQ belongs to a known network interface here (the API\'s nic field is empty for all of them).');
  const rowsByIRQ = new Map();
  const irqTable = irqList.length ? h('table', { id: 'irq-table', class: 'stack' },
    h('thead', null, h('tr', null, h('th', null, 'IRQ'), h('th', null, 'Device'), h('th', null, 'Affinity'), h('th', null, 'Runs on'),
      h('th', { class: 'num' }, 'Count'), h('th', { class: 'num' }, 'Rate'), canPin ? h('th', null, '') : null)),
    h('tbody', null, irqList.map((q) => {
      const tr = h('tr', { data: { irq: String(q.irq), nic: q.nic } },
        h('td', { 'data-label': 'IRQ', class: 'first' }, String(q.irq)),
        h('td', { 'data-label': 'Device' }, h('div', null, q.nic ? [badge(q.nic, 'accent'), ' '] : null, h('span', { class: 'mono' }, q.name), q.managed ? [' ', badge('managed')] : null,
          q.chip ? h('div', { class: 'muted' }, q.chip) : null)),
        h('td', { 'data-label': 'Affinity', class: 'mono' }, q.affinity.join(',') || '—', q.pinned ? [' ', badge('pinned', 'accent')] : null),
        h('td', { 'data-label': 'Runs on', class: 'mono' }, q.effective.join(',') || '—'),
        h('td', { 'data-label': 'Count', class: 'num', data: { irqCount: String(q.irq) } }, num(q.count)),
        h('td', { 'data-label': 'Rate', class: 'num', data: { irqRate: String(q.irq) } }, '…'),
        canPin ? h('td', { 'data-label': '', class: 'num' }, q.managed ? null : h('button', {
          type: 'button', class: 'btn small', 'data-write': '', 'data-action': 'pin-irq', 'data-irq': String(q.irq),
          'aria-label': `Pin IRQ ${q.irq} to CPUs`, onclick: (e) => pinIRQ(q, e.currentTarget),
        }, 'Pin…')) : null);
      rowsByIRQ.set(q.irq, tr);
      return tr;
    }))) : null;
  const filter = () => {
    const only = nicBox.checked;
    for (const [, tr] of rowsByIRQ) tr.hidden = only && !tr.dataset.nic;
    noNIC.hidden = !(only && nicCount === 0);
  };
  nicBox.addEventListener('change', filter);
  root.append(h('section', { class: 'panel', id: 'irqs' },
    h('h2', null, 'IRQs'),
    irqs.ok ? [
      h('div', { class: 'toolbar' }, h('label', { class: 'check', for: 'irq-nic-only' }, nicBox, ` Network IRQs only (${nicCount})`), updated),
      irqTable ? [noNIC, irqTable] : h('p', { class: 'empty' }, 'No IRQ reported.')]
      : [notAvailable('IRQ affinities and counts', '/api/v1/irqs'),
        pinned.length ? h('p', null, 'Configured pins: ', pinned.map((p) => `IRQ ${p.irq} → CPU ${p.cpus.join(',')}`).join('; ')) : null]));
  filter();
  if (!irqs.ok) return undefined;

  // Live counts: read again every POLL_MS, rates from the last two reads.
  let prevAt = performance.now();
  let reads = 1;
  let stopped = false;
  let busy = false;
  const tick = async () => {
    if (stopped || busy || document.hidden || ctx.dialogOpen()) return;
    busy = true;
    try {
      const data = await get('/api/v1/irqs');
      if (stopped) return;
      const now = performance.now();
      const cur = irqsOf(data);
      const { perIRQ, perCPU } = rates(irqList, cur, (now - prevAt) / 1000);
      irqList = cur; prevAt = now; reads++;
      for (const q of cur) {
        const c = root.querySelector(`[data-irq-count="${q.irq}"]`);
        if (c) c.textContent = num(q.count);
        const r = root.querySelector(`[data-irq-rate="${q.irq}"]`);
        if (r) r.textContent = perIRQ.has(q.irq) ? rate(perIRQ.get(q.irq)) : '—';
      }
      root.querySelectorAll('[data-cpu-rate]').forEach((el) => {
        const v = perCPU.get(Number(el.dataset.cpuRate)) || 0;
        el.textContent = rate(v, '');
      });
      root.dataset.reads = String(reads);
      updated.textContent = `rates from the last two reads · updated ${when(new Date())}`;
    } catch (e) {
      updated.textContent = `not updated: ${e.message}`;
    } finally {
      busy = false;
    }
  };
  // The first rates a second after the page opened, then every POLL_MS.
  const first = setTimeout(tick, 1000);
  const timer = setInterval(tick, POLL_MS);
  return () => { stopped = true; clearTimeout(first); clearInterval(timer); };
}
