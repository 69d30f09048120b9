// A JSON diff of two config documents, readable by people: arrays of
// objects with a "name" are matched by name (so a removed server does not
// show as every later server changing), other arrays by position.

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

export function show(v) {
  if (v === undefined) return '';
  const s = JSON.stringify(v);
  return s.length > 160 ? s.slice(0, 157) + '…' : s;
}
