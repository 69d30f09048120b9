// Small DOM helpers: element building, formatting, toasts, dialogs.

// h builds an element. attrs: class, text, html is not supported on purpose
// (no innerHTML anywhere: names come from the API and may hold anything).
// Keys starting with "on" add listeners; "data" is an object of data-*;
// true/false values set or omit boolean attributes.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k === 'data') for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = dv;
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'value') el.value = v;
      else if (k === 'style') el.style.cssText = v; // CSSOM: allowed under a strict CSP
      else if (v === true) el.setAttribute(k, '');
      else el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }

export function btn(label, attrs = {}, onclick) {
  return h('button', { type: 'button', ...attrs, class: 'btn ' + (attrs.class || ''), onclick }, label);
}

// tip is a word with its explanation: focusable (keyboard, and a tap on
// a touch screen), the explanation shown by CSS on focus and hover
// (.tip::after, from data-tip) and read by screen readers.
export function tip(word, why) {
  return h('abbr', { class: 'tip', tabindex: '0', 'data-tip': why, 'aria-label': `${word}: ${why}` }, word);
}

export function badge(text, kind = '') { return h('span', { class: 'badge ' + kind }, text); }

const nf = new Intl.NumberFormat('en');
export function num(v) { return v === null || v === undefined || Number.isNaN(v) ? '—' : nf.format(v); }

export function bytes(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0; let x = Math.abs(v);
  while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
  return (v < 0 ? '-' : '') + (i === 0 ? String(Math.round(x)) : x.toFixed(x < 10 ? 1 : 0)) + ' ' + u[i];
}

export function rate(v, unit = '/s') {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  return (v >= 100 ? nf.format(Math.round(v)) : v.toFixed(v >= 10 ? 1 : 2)) + unit;
}

// when is the page's one format of a date and time: local time as
// "2026-05-04 13:07:21" (sortable, the same in every locale).
export function when(t) {
  if (t === null || t === undefined || t === '') return '—';
  const d = t instanceof Date ? t : new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  const p = (x) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function ago(t) {
  if (!t) return '—';
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (s < 0) return when(d);
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.round(s / 60) + ' min ago';
  if (s < 86400) return Math.round(s / 3600) + ' h ago';
  return when(d);
}

export function duration(sec) {
  if (sec === null || sec === undefined) return '—';
  const d = Math.floor(sec / 86400); const hh = Math.floor(sec % 86400 / 3600); const m = Math.floor(sec % 3600 / 60);
  if (d) return `${d} d ${hh} h`;
  if (hh) return `${hh} h ${m} min`;
  if (m) return `${m} min ${sec % 60} s`;
  return `${sec} s`;
}

// toast shows msg (text or nodes) for a while: kind "bad" (an error) or
// "warn" (done, but not everywhere: a node refused a write) stay longer.
export function toast(msg, kind = '') {
  const box = document.getElementById('toasts');
  const t = h('div', { class: 'toast ' + kind, role: kind === 'bad' || kind === 'warn' ? 'alert' : 'status' }, msg);
  box.appendChild(t);
  setTimeout(() => t.remove(), kind === 'bad' || kind === 'warn' ? 10000 : 3500);
}

// modal opens a <dialog> holding content (built by build(close)) and resolves
// with what close() was given; Escape resolves with undefined, after
// asking when a form in it was edited (a filled form is not thrown away
// by one key).
export function modal(build, { label = 'Dialog', wide = false } = {}) {
  return new Promise((resolve) => {
    const dlg = h('dialog', { 'aria-label': label });
    if (wide) dlg.style.width = 'min(980px, calc(100vw - 24px))';
    let done = false;
    // The control that opened the dialog gets the focus back when it
    // closes (keyboard users continue where they were).
    const opener = document.activeElement;
    const close = (v) => {
      if (done) return;
      done = true;
      unhook();
      dlg.close();
      dlg.remove();
      if (opener && opener.isConnected && typeof opener.focus === 'function') opener.focus();
      resolve(v);
    };
    // edited: the operator typed or chose something in a form of it.
    let edited = false;
    const mark = (e) => { if (e.target.closest('form')) edited = true; };
    dlg.addEventListener('input', mark);
    dlg.addEventListener('change', mark);
    let asking = false;
    // leave closes the dialog, after asking when its form was edited; it
    // says whether it closed.
    const leave = async () => {
      if (asking) return false;
      if (!edited) { close(undefined); return true; }
      asking = true;
      const discard = await confirmBox('Discard the changes?', h('p', null, 'This form has changes that are not saved. Keep editing, or discard them and close the form.'),
        { ok: 'Discard changes', cancel: 'Keep editing', danger: true });
      asking = false;
      if (discard) close(undefined);
      return discard;
    };
    dlg.addEventListener('cancel', (e) => { e.preventDefault(); leave(); });
    // The browser's Back (or any change of the page's address) leaves the
    // dialog as Escape does; "Keep editing" goes back to the address it
    // was opened on.
    const openHash = location.hash;
    const onHash = async () => {
      if (done || asking || location.hash === openHash) return;
      if (!await leave() && !done) location.hash = openHash;
    };
    window.addEventListener('hashchange', onHash);
    const unhook = () => window.removeEventListener('hashchange', onHash);
    // A browser may close a dialog without a cancelable cancel event (a
    // second Escape without a user action between): resolve all the same.
    dlg.addEventListener('close', () => close(undefined));
    dlg.appendChild(build(close));
    document.body.appendChild(dlg);
    dlg.showModal();
    const first = dlg.querySelector('[autofocus], input:not([type=hidden]), select, textarea, button');
    if (first) first.focus();
  });
}

// confirmBox asks a yes/no question in a dialog; body may be a node.
export function confirmBox(title, body, { ok = 'Confirm', cancel = 'Cancel', danger = false } = {}) {
  return modal((close) => h('div', { class: 'body' },
    h('h2', { text: title }),
    body,
    h('div', { class: 'actions' },
      btn(cancel, { class: 'ghost', 'data-confirm': 'no' }, () => close(false)),
      btn(ok, { class: danger ? 'danger solid' : 'primary', 'data-confirm': 'yes' }, () => close(true)))), { label: title });
}

export function planList(plan) {
  const items = (plan && plan.items) || [];
  if (!items.length) return h('p', { class: 'muted' }, 'Nothing changes.');
  const kind = { create: 'ok', update: 'warn', delete: 'bad' };
  const how = { in_place: 'in place', rebind: 'rebind', restart_loops: 'restarts loops' };
  return h('ul', { class: 'plan' }, items.map((it) => h('li', null,
    badge(it.op, kind[it.op] || ''), h('code', { text: it.object }),
    badge(how[it.apply] || it.apply, it.apply === 'restart_loops' ? 'warn' : ''),
    it.fields && it.fields.length ? h('span', { class: 'muted' }, it.fields.join(', ')) : null)));
}

export function planSummary(plan) {
  const items = (plan && plan.items) || [];
  if (!items.length) return 'nothing changed';
  return items.map((it) => `${it.op} ${it.object}`).join(', ');
}
