// Node-local settings: what one node of a cluster runs instead of the
// document's tuning.nbthread, cpu_map and irq (machines differ), read and
// written through /api/v1/cluster/nodes/{name}/settings. A member left
// empty takes the document's value; "Use the document's" removes the
// node's section (DELETE).

import { h, modal, btn, toast } from '../dom.js';
import { request, enc, ApiError } from '../api.js';
import { write, problemText } from '../common.js';
import { input, textArea, formShell, showErrors } from '../forms.js';
import { guardedWrite } from '../conflict.js';

// openSettings opens the settings form of node name; the page is drawn
// again after a change.
export async function openSettings(ctx, name) {
  const path = `/api/v1/cluster/nodes/${enc(name)}/settings`;
  let ed;
  try {
    const r = await request('GET', path);
    ed = { data: r.data || {}, etag: r.headers.get('ETag'), base: structuredClone(r.data || {}) };
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) { toast(problemText(e), 'bad'); return; }
    ed = { data: {}, etag: null, base: {} }; // no section yet
  }
  const model = ed.data;
  // cpu_map and irq are edited as JSON (their shapes are those of the
  // document: see the CPU & IRQs page and /docs/).
  const json = { cpu_map: model.cpu_map ? JSON.stringify(model.cpu_map, null, 1) : undefined, irq: model.irq ? JSON.stringify(model.irq, null, 1) : undefined };
  const done = await modal((close) => {
    const body = h('div', { data: { ptr: '/' } },
      h('p', { class: 'hint' }, `What ${name} runs instead of the document's values; empty: the document's.`),
      h('div', { class: 'fields' },
        input(model, ['nbthread'], 'Threads (nbthread)', 'int', { min: 0, placeholder: 'the document\'s', hint: '0 = one per CPU of this node' })),
      textArea(json, ['cpu_map'], 'CPU map (JSON)', { rows: 3, placeholder: '{"mode": "auto"}' }),
      textArea(json, ['irq'], 'IRQ pinning (JSON)', { rows: 3, placeholder: '{"policy": "none"}' }));
    const form = formShell(`Settings of node ${name}`, body, {
      submitLabel: 'Save', onCancel: () => close(false),
      onSubmit: async (f) => {
        const out = {};
        if (model.nbthread !== undefined && model.nbthread !== '') out.nbthread = model.nbthread;
        for (const k of ['cpu_map', 'irq']) {
          if (json[k] === undefined || json[k].trim() === '') continue;
          try { out[k] = JSON.parse(json[k]); } catch (x) {
            const err = new Error(`${k} is not JSON: ${x.message}`);
            err.errors = [{ field: '/' + k, message: `not JSON: ${x.message}` }];
            err.problem = { title: 'Not saved' };
            throw err;
          }
        }
        const what = `Settings of ${name} saved`;
        if (ed.etag) {
          if (!await guardedWrite(ctx, f, ed, 'PUT', path, out, what, () => { close(false); openSettings(ctx, name); })) return;
        } else {
          await write(ctx, 'PUT', path, out, what);
        }
        close(true);
      },
    });
    form.id = 'node-settings-form';
    if (ed.etag || Object.keys(ed.base).length) {
      const reset = btn('Use the document\'s', { class: 'ghost danger', 'data-action': 'reset-settings' }, async () => {
        try {
          await write(ctx, 'DELETE', path, undefined, `Settings of ${name} removed: it runs the document's`);
          close(true);
        } catch (e) { showErrors(form, e); }
      });
      form.querySelector('.actions').prepend(reset);
    }
    return form;
  }, { label: `Settings of node ${name}` });
  if (done) await ctx.refresh(`button[data-action="node-settings"][data-node="${CSS.escape(name)}"]`);
}
