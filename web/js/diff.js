// A JSON diff of two config documents, readable by people: arrays of
// objects with a "name" are matched by name (so a removed server does not
// show as every later server changing), other arrays by position.

import { h } from './dom.js';

function isObj(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }
function named(a) { return Array.isArray(a) && a.length > 0 && a.every((x) => isObj(x) && typeof x.name === 'string'); }

// jsonDiff returns [{path, op: add|del|chg, old, new}].
export function jsonDiff(a, b, path = '', out = []) {
  if (JSON.stringify(a) === JSON.stringify(b)) return out;
  if (isObj(a) && isObj(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    for (const k of keys) {
      const p = path + '.' + k;
      if (!(k in b)) out.push({ path: p, op: 'del', old: a[k] });
      else if (!(k in a)) out.push({ path: p, op: 'add', new: b[k] });
      else jsonDiff(a[k], b[k], p, out);
    }
    return out;
  }
  if (Array.isArray(a) && Array.isArray(b) && (named(a) || named(b)) && (a.length === 0 || named(a)) && (b.length === 0 || named(b))) {
    const am = new Map(a.map((x) => [x.name, x]));
    const bm = new Map(b.map((x) => [x.name, x]));
    for (const [n, x] of am) {
      const p = `${path}[${n}]`;
      if (!bm.has(n)) out.push({ path: p, op: 'del', old: x });
      else jsonDiff(x, bm.get(n), p, out);
    }
    for (const [n, x] of bm) if (!am.has(n)) out.push({ path: `${path}[${n}]`, op: 'add', new: x });
    return out;
  }
  if (Array.isArray(a) && Array.isArray(b) && a.every((x) => !isObj(x) && !Array.isArray(x)) && b.every((x) => !isObj(x) && !Array.isArray(x))) {
    out.push({ path, op: 'chg', old: a, new: b });
    return out;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n; i++) {
      const p = `${path}[${i}]`;
      if (i >= b.length) out.push({ path: p, op: 'del', old: a[i] });
      else if (i >= a.length) out.push({ path: p, op: 'add', new: b[i] });
      else jsonDiff(a[i], b[i], p, out);
    }
    return out;
  }
  out.push({ path, op: a === undefined ? 'add' : b === undefined ? 'del' : 'chg', old: a, new: b });
  return out;
}

// SHORT: a value whose JSON is longer is shown folded (showEl).
const SHORT = 80;

export function show(v) {
  if (v === undefined) return '';
  const s = JSON.stringify(v);
  return s.length > 160 ? s.slice(0, 157) + '…' : s;
}

// showEl is a value as a node: short values as their JSON, a long object
// folded into a <details> whose summary names its size and that expands to
// the whole value, indented (never cut).
export function showEl(v) {
  if (v === undefined) return '';
  // Spaces between the tokens (never inside a string: JSON strings hold
  // no raw newline) give the browser places to wrap without cutting words.
  const s = JSON.stringify(v, null, 1).replace(/\n\s*/g, ' ');
  if (s.length <= SHORT) return s;
  const what = Array.isArray(v) ? `[${v.length} item${v.length === 1 ? '' : 's'}]`
    : v && typeof v === 'object' ? `{${Object.keys(v).length} field${Object.keys(v).length === 1 ? '' : 's'}${typeof v.name === 'string' ? ': ' + v.name : ''}}`
      : s.slice(0, SHORT - 1) + '…';
  return h('details', { class: 'long' }, h('summary', null, what), h('pre', null, JSON.stringify(v, null, 2)));
}

// diffTable shows a jsonDiff as a table (Where, old, new), with headers
// oldLabel and newLabel; under 640 px each change becomes a card.
export function diffTable(d, oldLabel, newLabel, attrs = {}) {
  return h('table', { ...attrs, class: 'diff stack' },
    h('thead', null, h('tr', null, h('th', null, ''), h('th', null, 'Where'), h('th', null, oldLabel), h('th', null, newLabel))),
    h('tbody', null, d.map((x) => h('tr', { class: x.op },
      h('td', { class: 'op', 'data-label': '' }, x.op === 'add' ? '+' : x.op === 'del' ? '−' : '~'),
      h('td', { class: 'path', 'data-label': 'Where' }, x.path.replace(/^\./, '') || '(object)'),
      h('td', { class: 'old', 'data-label': oldLabel }, x.op === 'add' ? h('span', { class: 'muted' }, '(absent)') : showEl(x.old)),
      h('td', { class: 'new', 'data-label': newLabel }, x.op === 'del' ? h('span', { class: 'muted' }, '(removed)') : showEl(x.new))))));
}
