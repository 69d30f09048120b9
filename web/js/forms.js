// Forms bound to a plain JSON model. Every input carries the JSON pointer of
// the value it edits (data-ptr on its .field wrapper), so a problem from the
// API ({errors: [{field: "/servers/0/port", message}]}) is shown next to the
// input it names; a pointer with no input of its own falls back to its
// nearest ancestor that has one (a row, a fieldset), then to the summary.

import { h, clear } from './dom.js';

let seq = 0;
const uid = (p) => `${p}-${++seq}`;

export function ptrOf(path) {
  return '/' + path.map((k) => String(k).replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
}
export function parsePtr(ptr) {
  if (!ptr || ptr === '/') return [];
  return ptr.replace(/^\//, '').split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

export function getAt(obj, path) {
  let v = obj;
  for (const k of path) { if (v === null || v === undefined) return undefined; v = v[k]; }
  return v;
}
export function setAt(obj, path, val) {
  let o = obj;
  for (let i = 0; i < path.length - 1; i++) {
    const k = path[i];
    if (o[k] === null || o[k] === undefined || typeof o[k] !== 'object') o[k] = typeof path[i + 1] === 'number' ? [] : {};
    o = o[k];
  }
  const last = path[path.length - 1];
  if (val === undefined) delete o[last]; else o[last] = val;
}

// input builds a labelled, bound input. kind: text | int | select | bool.
// opts: options (for select: [value, label] or value), placeholder, hint,
// required, optional (empty string -> field removed), min, max, onchange.
export function input(model, path, label, kind = 'text', opts = {}) {
  const id = uid('f');
  const errId = id + '-err';
  const cur = getAt(model, path);
  let el;
  if (kind === 'select') {
    el = h('select', { id, name: path.join('.'), 'aria-describedby': errId },
      (opts.options || []).map((o) => {
        const [v, l] = Array.isArray(o) ? o : [o, o];
        return h('option', { value: v, selected: String(cur ?? opts.default ?? '') === String(v) }, l);
      }));
  } else if (kind === 'bool') {
    el = h('input', { id, type: 'checkbox', name: path.join('.'), checked: !!cur, 'aria-describedby': errId });
  } else {
    el = h('input', {
      id, name: path.join('.'), 'aria-describedby': errId,
      type: kind === 'int' ? 'number' : 'text', inputmode: kind === 'int' ? 'numeric' : null,
      step: kind === 'int' ? '1' : null, min: opts.min, max: opts.max,
      placeholder: opts.placeholder, required: !!opts.required, autocomplete: 'off', spellcheck: 'false',
      value: cur === undefined || cur === null ? '' : String(cur),
    });
  }
  const update = () => {
    let v;
    if (kind === 'bool') v = el.checked;
    else if (kind === 'int') {
      const t = el.value.trim();
      // A value the browser cannot read as a number is sent as text so the
      // API (not the page) says what is wrong with it.
      v = t === '' ? undefined : (/^-?\d+$/.test(t) ? Number(t) : t);
      if (t !== '' && el.validity && el.validity.badInput) v = el.value;
    } else {
      v = el.value;
      if (v === '' && opts.optional) v = undefined;
    }
    setAt(model, path, v);
    if (opts.onchange) opts.onchange(v);
  };
  el.addEventListener(kind === 'select' || kind === 'bool' ? 'change' : 'input', update);
  const wrap = h('div', { class: 'field' + (kind === 'bool' ? ' check' : ''), data: { ptr: ptrOf(path) } },
    h('label', { for: id }, label),
    el,
    opts.hint ? h('div', { class: 'hint' }, opts.hint) : null,
    h('div', { class: 'err', id: errId }));
  return wrap;
}

// field wraps a control el bound by the caller in a .field with the JSON
// pointer of path (for errors), a label and an error box.
function field(path, label, el, hint) {
  const id = uid('f');
  el.id = id;
  el.setAttribute('aria-describedby', id + '-err');
  el.name = path.join('.');
  return h('div', { class: 'field', data: { ptr: ptrOf(path) } },
    h('label', { for: id }, label), el,
    hint ? h('div', { class: 'hint' }, hint) : null,
    h('div', { class: 'err', id: id + '-err' }));
}

// multiSelect edits an array of strings chosen among options (in the
// options' order); none chosen sets an empty array.
export function multiSelect(model, path, label, options, opts = {}) {
  const cur = getAt(model, path) || [];
  const el = h('select', { multiple: true, size: Math.min(Math.max(options.length, 2), 6) },
    options.map((o) => h('option', { value: o, selected: cur.includes(o) }, o)));
  el.addEventListener('change', () => setAt(model, path, [...el.selectedOptions].map((o) => o.value)));
  return field(path, label, el, opts.hint);
}

// listInput edits an array of strings as one text input, the items
// separated by commas or spaces; empty removes the member.
export function listInput(model, path, label, opts = {}) {
  const cur = getAt(model, path);
  const el = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: opts.placeholder,
    value: Array.isArray(cur) ? cur.join(', ') : '' });
  el.addEventListener('input', () => {
    const items = el.value.split(/[\s,]+/).filter((x) => x !== '');
    setAt(model, path, items.length ? items : undefined);
  });
  return field(path, label, el, opts.hint);
}

// textArea edits a multi-line string; empty removes the member.
export function textArea(model, path, label, opts = {}) {
  const el = h('textarea', { rows: opts.rows || 4, spellcheck: 'false', placeholder: opts.placeholder, value: getAt(model, path) || '' });
  el.addEventListener('input', () => setAt(model, path, el.value === '' ? undefined : el.value));
  return field(path, label, el, opts.hint);
}

// group is a fieldset standing for an object pointer (errors like "/sched").
export function group(path, legend, ...children) {
  return h('fieldset', { data: { ptr: ptrOf(path) } }, h('legend', null, legend), ...children, h('div', { class: 'err' }));
}

// rows renders model[path] (an array) as editable rows with add/remove.
// rowFn(itemPath, item) returns the inputs of one row.
export function rows(model, path, { title, add = 'Add', blank, rowFn, min = 0 }) {
  const box = h('div', { class: 'rows' });
  const sec = h('fieldset', { data: { ptr: ptrOf(path) } }, h('legend', null, title), box, h('div', { class: 'err' }));
  const render = () => {
    clear(box);
    const arr = getAt(model, path) || [];
    arr.forEach((item, i) => {
      const rm = h('button', {
        type: 'button', class: 'btn small ghost rm', 'aria-label': `Remove ${title.toLowerCase()} ${i + 1}`,
        disabled: arr.length <= min,
        onclick: () => { arr.splice(i, 1); render(); },
      }, 'Remove');
      box.appendChild(h('div', { class: 'row', data: { ptr: ptrOf([...path, i]) } },
        rowFn([...path, i], item), rm, h('div', { class: 'rowerr err' })));
    });
    if (!arr.length) box.appendChild(h('div', { class: 'muted' }, 'None.'));
  };
  if (!Array.isArray(getAt(model, path))) setAt(model, path, []);
  render();
  sec.appendChild(h('div', { class: 'actions left' },
    h('button', {
      type: 'button', class: 'btn small', onclick: () => {
        const arr = getAt(model, path);
        arr.push(typeof blank === 'function' ? blank(arr.length) : structuredClone(blank));
        render();
        const inputs = box.querySelectorAll('.row:last-child input');
        if (inputs[0]) inputs[0].focus();
      },
    }, add)));
  return sec;
}

export function clearErrors(form) {
  form.querySelectorAll('.invalid').forEach((e) => e.classList.remove('invalid'));
  form.querySelectorAll('[aria-invalid]').forEach((e) => e.removeAttribute('aria-invalid'));
  form.querySelectorAll('.err').forEach((e) => { e.textContent = ''; });
  const sum = form.querySelector('.summary');
  if (sum) sum.remove();
}

// showErrors maps an ApiError (or any Error) onto the form: each field
// error next to its input, and a summary at the top listing them all.
export function showErrors(form, err) {
  clearErrors(form);
  const errors = (err && err.errors) || [];
  const items = [];
  for (const fe of errors) {
    const ptr = typeof fe.field === 'string' ? fe.field : '';
    let target = null;
    let parts = parsePtr(ptr);
    while (true) {
      target = form.querySelector(`[data-ptr="${CSS.escape(ptrOf(parts))}"]`);
      if (target || parts.length === 0) break;
      parts = parts.slice(0, -1);
    }
    if (parts.length === 0) target = null; // the whole body: summary only
    let link = null;
    if (target) {
      target.classList.add('invalid');
      const ctl = target.querySelector(':scope > input, :scope > select, :scope > textarea');
      if (ctl) ctl.setAttribute('aria-invalid', 'true');
      const box = target.querySelector(':scope > .err');
      if (box) box.textContent = (box.textContent ? box.textContent + ' ' : '') + (target.dataset.ptr === ptr ? fe.message : `${ptr}: ${fe.message}`);
      link = ctl || target.querySelector('input, select');
    }
    items.push({ ptr, message: fe.message, code: fe.code, link });
  }
  const title = (err && err.problem && err.problem.title) || 'The change was refused';
  const sum = h('div', { class: 'summary', role: 'alert', tabindex: '-1' },
    h('b', null, title), (err && err.problem && err.problem.status) ? h('span', { class: 'muted' }, ` (HTTP ${err.problem.status})`) : null,
    items.length ? h('ul', null, items.map((it) => h('li', null,
      it.ptr ? (it.link ? h('a', { href: '#', onclick: (e) => { e.preventDefault(); it.link.focus(); } }, h('code', null, it.ptr)) : h('code', null, it.ptr)) : null,
      it.ptr ? ': ' : '', it.message))) : h('div', null, (err && err.message) || String(err)));
  const head = form.querySelector(':scope > h2');
  if (head) head.after(sum); else form.prepend(sum);
  sum.focus();
  const first = form.querySelector('[aria-invalid="true"]');
  if (first) first.scrollIntoView({ block: 'nearest' });
}

// formDialog lays out a form for a modal: title, body nodes, actions.
// submit(model, {dryRun}) performs the request; on error the problem is
// mapped onto the form and the dialog stays open.
export function formShell(title, body, { submitLabel = 'Save', onSubmit, onCancel, preview, previewLabel = 'Preview plan' }) {
  const form = h('form', { novalidate: true, 'data-form': title },
    h('h2', null, title), body,
    h('div', { class: 'plan-preview' }),
    h('div', { class: 'actions' },
      onCancel ? h('button', { type: 'button', class: 'btn ghost', 'data-action': 'cancel', onclick: onCancel }, 'Cancel') : null,
      preview ? h('button', { type: 'button', class: 'btn', 'data-action': 'preview', onclick: () => run(true) }, previewLabel) : null,
      h('button', { type: 'submit', class: 'btn primary', 'data-action': 'submit' }, submitLabel)));
  let busy = false;
  async function run(dry) {
    if (busy) return;
    busy = true;
    form.querySelectorAll('button').forEach((b) => { b.disabled = true; });
    try {
      clearErrors(form);
      await onSubmit(form, dry);
    } catch (e) {
      showErrors(form, e);
    } finally {
      busy = false;
      form.querySelectorAll('button').forEach((b) => { b.disabled = false; });
    }
  }
  form.addEventListener('submit', (e) => { e.preventDefault(); run(false); });
  return form;
}
