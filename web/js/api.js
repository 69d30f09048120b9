// The admin API client: the same REST API curl uses. The token lives in
// sessionStorage (this tab only; never localStorage, never a cookie) and is
// sent as Authorization: Bearer on every request. A 401 opens the login box;
// requests waiting for it resume once a token is accepted.

const TOKEN_KEY = 'spliced.token';

export class ApiError extends Error {
  constructor(status, problem, method, path) {
    const p = problem && typeof problem === 'object' ? problem : {};
    super(p.detail || p.title || `${method} ${path}: HTTP ${status}`);
    this.status = status;
    this.problem = p;
    this.errors = Array.isArray(p.errors) ? p.errors : [];
  }
}

export function token() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}
export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
  tokenListeners.forEach((fn) => fn(t));
}
const tokenListeners = new Set();
export function onToken(fn) { tokenListeners.add(fn); }

let loginWait = null; // promise of the open login box
let loginUI = null;   // function(): Promise<void>, set by the app

export function setLoginUI(fn) { loginUI = fn; }

// Login listeners are told when the login box opens (true) and closes
// (false): live.js stops its stream and polling meanwhile, so a stale tab
// with a revoked token sends nothing until someone signs in (issue 13: its
// failures would keep its address rate-limited).
const loginListeners = new Set();
export function onLogin(fn) { loginListeners.add(fn); }
export function loginShown() { return loginWait !== null; }

// needLogin opens the login box once, however many requests got a 401.
export function needLogin() {
  if (!loginWait) {
    loginWait = (loginUI ? loginUI() : Promise.reject(new Error('no login UI'))).finally(() => {
      loginWait = null;
      loginListeners.forEach((fn) => fn(false));
    });
    loginListeners.forEach((fn) => fn(true));
  }
  return loginWait;
}

export function authHeaders(extra = {}) {
  const hd = { Accept: 'application/json', ...extra };
  const t = token();
  if (t) hd.Authorization = 'Bearer ' + t;
  return hd;
}

// request sends one API request. body undefined: none. PATCH bodies are
// JSON merge patches; opts.ifMatch is sent as If-Match. It resolves {status, data, headers}; a non-2xx answer
// rejects with ApiError carrying the problem document.
export async function request(method, path, body, opts = {}) {
  for (let attempt = 0; ; attempt++) {
    // While the login box is shown nothing is sent with the refused token.
    if (loginWait) await loginWait.catch(() => {});
    const headers = authHeaders();
    const init = { method, headers, signal: opts.signal, cache: 'no-store' };
    if (opts.ifMatch) headers['If-Match'] = opts.ifMatch; // the ETag the write was built from
    if (body !== undefined) {
      headers['Content-Type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    if (res.status === 401 && !opts.noLogin && attempt < 5) {
      await needLogin();
      continue;
    }
    let data = null;
    const ct = res.headers.get('Content-Type') || '';
    if (res.status !== 204 && res.status !== 304) {
      const text = await res.text();
      if (text && ct.includes('json')) {
        try { data = JSON.parse(text); } catch { data = { detail: text }; }
      } else if (text) {
        data = { detail: text };
      }
    }
    answerListeners.forEach((fn) => fn(res, res.ok ? null : data));
    if (!res.ok) throw new ApiError(res.status, data, method, path);
    return { status: res.status, data, headers: res.headers };
  }
}

// Answer listeners see every answer request() reads (the response, and its
// problem document when not 2xx): cluster.js watches X-Spliced-Stale and
// 503 store-unavailable there.
const answerListeners = new Set();
export function onAnswer(fn) { answerListeners.add(fn); }

export async function get(path, opts) { return (await request('GET', path, undefined, opts)).data; }

// tryGet answers {ok: false} instead of failing when the endpoint is
// absent (404), so pages can say so.
export async function tryGet(path, opts) {
  try {
    return { ok: true, data: await get(path, opts) };
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return { ok: false, status: e.status, error: e };
    throw e;
  }
}

export const enc = encodeURIComponent;
