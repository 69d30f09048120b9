// Tuning: the global data-plane knobs, validated by the API.

import { h, badge, confirmBox } from '../dom.js';
import { input, group, formShell } from '../forms.js';
import { loadForEdit, guardedWrite } from '../conflict.js';
import { previewPlan } from './backends.js';

export default async function tuning(ctx, root) {
  // The form is built from the tuning as GET returns it, with its ETag.
  const ed = await loadForEdit('/api/v1/tuning');
  const model = ed.data;
  const nb0 = model.nbthread;
  const canAdmin = ctx.can('admin');
  const body = h('div', { data: { ptr: '/' } },
    group([], 'Loops', h('div', { class: 'fields' },
      input(model, ['nbthread'], 'Threads (nbthread)', 'int', { min: 0, hint: '0 = one per CPU in the affinity mask' }),
      input(model, ['runqueue_depth'], 'Runqueue depth', 'int', { min: 0, hint: 'tasklets per round' }),
      input(model, ['maxpollevents'], 'Max poll events', 'int', { min: 0, hint: 'events per epoll_wait' }),
      input(model, ['busy_poll_us'], 'Busy poll (µs)', 'int', { min: 0, hint: 'poll without sleeping this long first; 0 = off' }),
      input(model, ['poll_nap_us'], 'Poll nap (µs)', 'int', { min: -1, max: 10000, hint: 'under load, nap this long on a timer before polling; 0 = default (20), -1 = off' }))),
    group(['sched'], 'Scheduler budget (percent; must add up to 100)', h('div', { class: 'fields' },
      input(model, ['sched', 'urgent'], 'Urgent (I/O)', 'int', { min: 0, max: 100 }),
      input(model, ['sched', 'normal'], 'Normal (tasks, timers)', 'int', { min: 0, max: 100 }),
      input(model, ['sched', 'bulk'], 'Bulk (heavy transfers)', 'int', { min: 0, max: 100 }))),
    group([], 'Accepting', h('div', { class: 'fields' },
      input(model, ['distribution'], 'Distribution', 'select', { options: [['p2c-rr', 'p2c-rr (power of two)'], 'round-robin', 'least-conn', 'local', ['p2c', 'p2c (pure random, to compare)']] }),
      input(model, ['maxaccept'], 'Max accept', 'int', { min: 0, hint: 'per listener per round' }),
      input(model, ['maxconn'], 'Max connections', 'int', { min: 0, hint: '0 = from RLIMIT_NOFILE' }))),
    group([], 'Buffers and pipes', h('div', { class: 'fields' },
      input(model, ['bufsize'], 'Buffer size (bytes)', 'int', { min: 0 }),
      input(model, ['pipesize'], 'Pipe size (bytes)', 'int', { min: 0, hint: '0 = automatic (256 KiB as root, else the kernel default)' }),
      input(model, ['maxpipes'], 'Max pipes', 'int', { min: 0 }))),
    group([], 'Stopping', h('div', { class: 'fields' },
      input(model, ['grace_ms'], 'Grace (ms)', 'int', { min: 0, max: 3600000, hint: 'SIGTERM and removed loops: requests in flight finish, the rest is closed after it' }))));
  // The group fieldsets without a pointer of their own must not catch
  // errors for the whole body.
  body.querySelectorAll('fieldset[data-ptr="/"]').forEach((f) => f.removeAttribute('data-ptr'));

  const head = h('div', { class: 'page-head' }, h('h1', null, 'Tuning'),
    canAdmin ? null : badge('read only', 'warn'));
  root.append(head);
  if (!canAdmin) {
    body.querySelectorAll('input, select').forEach((e) => { e.disabled = true; });
    root.append(h('div', { class: 'panel', id: 'tuning-form' }, body));
    return;
  }
  const form = formShell('Data-plane tuning', body, {
    submitLabel: 'Apply', preview: true,
    onSubmit: async (f, dry) => {
      if (dry) return previewPlan(f, 'PUT', '/api/v1/tuning', model);
      // A new nbthread restarts the loops: say so before.
      if (model.nbthread !== nb0 && !await confirmBox(`Change nbthread from ${nb0 || 'one per CPU'} to ${model.nbthread || 'one per CPU'}?`,
        h('div', null,
          h('p', null, h('b', null, 'This restarts loops.'), ' More loops: they start and the binds move to them (no listening socket closes).',
            ' Fewer loops: the removed ones take no new connection, close their idle keep-alive connections, and close what is left after the grace period (', String(model.grace_ms ?? 10000), ' ms).'),
          h('p', null, 'Use Preview to see the plan first.')),
        { ok: 'Restart loops', danger: true })) { f.querySelector('[data-action="submit"]').focus(); return; }
      if (await guardedWrite(ctx, f, ed, 'PUT', '/api/v1/tuning', model, 'Tuning applied', () => ctx.refresh())) ctx.refresh();
    },
  });
  form.id = 'tuning-form';
  form.querySelector('[data-action="submit"]').dataset.write = '';
  form.querySelector('[data-action="preview"]').dataset.write = '';
  root.append(h('div', { class: 'panel' }, form));
}
