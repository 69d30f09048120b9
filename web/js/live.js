// Live data. The preferred source is /api/v1/events, read with fetch and a
// ReadableStream (EventSource cannot send the Authorization header); it
// reconnects by itself with backoff. While the stream carries no stats (or
// the endpoint answers 404), /api/v1/stats is polled every 2 s. Samples are
// kept for HISTORY_S seconds to draw rates; data older than STALE_MS is
// marked stale on the page. A page that shows a frontend's optional
// members (h2, tls, proxy) asks for them with wantFull: while the stream's
// stats lack a member /api/v1/stats has, /api/v1/stats is polled beside the
// stream and its members fill the stream's samples.

import { authHeaders, needLogin, onLogin, loginShown, get, ApiError } from './api.js';
import { normStats, normActivity, MEMBERS } from './stats.js';
import { readEvents } from './sse.js';

export const STALE_MS = 5000;
const HISTORY_S = 300;
const POLL_MS = 2000;

export class Live extends EventTarget {
  constructor() {
    super();
    this.mode = 'connecting';   // sse | poll | off
    this.stats = null;          // latest normStats
    this.statsAt = 0;           // ms of the latest stats sample
    this.statsMissing = false;  // /stats answered 404
    this.activity = null;       // latest normActivity
    this.activityAt = 0;
    this.activityMissing = false;
    this.eventsMissing = false;
    this.history = [];          // [{t (s), rates: Map name -> {req, bytes, e5}}]
    this.prev = null;           // previous sample, for rates
    this.rates = new Map();     // frontend -> {req, bytes, e5 (5xx)} per second
    this.generation = null;
    this._abort = null;
    this._timers = [];
    this._backoff = 1000;
    this._wantActivity = false;
    this._wantFull = false;
    this._full = null;          // latest normStats of /api/v1/stats (polled)
    this._fullAt = 0;
    this._streamLacks = null;   // the stream's stats lack a member the poll has (null: not known)
    this._epoch = 0;            // start() count: stale retries of an older run stop
    this._paused = false;       // stopped while the login box is shown
    onLogin((shown) => {
      if (shown && !this._stopped) { this.stop(); this._paused = true; }
      else if (!shown && this._paused) { this._paused = false; this.start(); }
    });
  }

  // start runs the stream and the polling; while the login box is shown it
  // waits for the box to close (no request with a refused token).
  start() {
    this.stop();
    if (loginShown()) { this._paused = true; return; }
    this._stopped = false;
    this._epoch++;
    this._stream(this._epoch);
    this._timers.push(setInterval(() => this._tick(), POLL_MS));
    this._timers.push(setInterval(() => this.dispatchEvent(new Event('clock')), 1000));
    this._tick();
  }

  stop() {
    this._stopped = true;
    if (this._abort) this._abort.abort();
    this._abort = null;
    this._timers.forEach(clearInterval);
    this._timers = [];
  }

  wantActivity(on) { this._wantActivity = on; if (on) this._pollActivity(); }

  // wantFull asks for every member of /api/v1/stats (see the top).
  wantFull(on) {
    this._wantFull = on;
    if (on) { this._streamLacks = null; this._tick(); }
  }

  isStale() { return !this.statsAt || Date.now() - this.statsAt > STALE_MS; }
  age() { return this.statsAt ? Date.now() - this.statsAt : null; }

  // ---- events stream ----
  async _stream(epoch) {
    if (this._stopped || this.eventsMissing || epoch !== this._epoch) return;
    const ctl = new AbortController();
    this._abort = ctl;
    try {
      const res = await fetch('/api/v1/events', { headers: authHeaders({ Accept: 'text/event-stream' }), signal: ctl.signal, cache: 'no-store' });
      if (res.status === 401) {
        needLogin(); // stops this, and starts it again once signed in
        return;
      }
      if (res.status === 429 || res.status === 503) { // stream caps: poll meanwhile
        await res.text();
        throw new Error('events: HTTP ' + res.status);
      }
      if (res.status === 404) {
        this.eventsMissing = true;
        this._setMode('poll');
        return;
      }
      if (!res.ok || !res.body) throw new Error('events: HTTP ' + res.status);
      this._setMode('sse');
      this._backoff = 1000;
      await readEvents(res.body, (type, payload) => this._event(type, payload));
      throw new Error('events: stream ended');
    } catch (e) {
      if (this._stopped || ctl.signal.aborted) return;
      this._setMode('poll');
      this._again(this._backoff, epoch);
      this._backoff = Math.min(this._backoff * 2, 15000);
    }
  }

  _again(ms, epoch) { setTimeout(() => this._stream(epoch), ms); }

  _event(type, payload) {
    const t = type.toLowerCase();
    const inner = payload && typeof payload === 'object' && payload.data && typeof payload.data === 'object' ? payload.data : payload;
    const kind = (payload && typeof payload.type === 'string' ? payload.type : t).toLowerCase();
    if (/stat|tick/.test(kind) || (inner && (inner.frontends || inner.backends) && !/config|change/.test(kind))) {
      this._stats(inner.stats || inner);
      const act = inner.activity || inner.loops;
      if (act) this._activity(act);
    } else if (/activ/.test(kind)) {
      this._activity(inner);
    } else {
      const gen = inner && typeof inner.generation === 'number' ? inner.generation : null;
      if (gen !== null) this.generation = gen;
      this.dispatchEvent(new CustomEvent('change', { detail: inner }));
    }
  }

  // ---- polling ----
  async _tick() {
    if (this._stopped || loginShown()) return;
    const stale = Date.now() - this.statsAt > POLL_MS + 500;
    const full = this._wantFull && this._streamLacks !== false && Date.now() - this._fullAt > POLL_MS - 200;
    if (!this.statsMissing && (stale || full)) {
      try {
        this._fullAt = Date.now();
        this._stats(await get('/api/v1/stats', { noLogin: false }), true);
      } catch (e) {
        if (e instanceof ApiError && e.status === 404) {
          this.statsMissing = true;
          this.dispatchEvent(new Event('stats'));
        }
      }
    }
    if (this._wantActivity) this._pollActivity();
    this._updateMode();
  }

  async _pollActivity() {
    if (this._stopped || loginShown() || this.activityMissing || Date.now() - this.activityAt < POLL_MS - 200) return;
    try {
      this._activity(await get('/api/v1/activity'));
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        this.activityMissing = true;
        this.dispatchEvent(new Event('activity'));
      }
    }
  }

  _activity(raw) {
    this.activity = normActivity(raw);
    this.activityAt = Date.now();
    this.dispatchEvent(new Event('activity'));
  }

  // _stats takes a sample: full when it is /api/v1/stats, else a stats
  // event, whose missing members are taken from the last full sample.
  _stats(raw, full = false) {
    const st = normStats(raw);
    const now = Date.now();
    if (full) this._full = st;
    else if (this._full) this._fill(st);
    // Rates: the server's own (over its last second) when it gives them,
    // else the difference of two samples over the server's clock (the
    // snapshot time), so two sources (stream and poll) do not skew them.
    const t = st.time / 1000;
    if (this.prev && t <= this.prev.t) { // a repeated sample: fresh, no new rate
      this.stats = st;
      this.statsAt = now;
      this.dispatchEvent(new Event('stats'));
      return;
    }
    const sample = { t, fe: new Map() };
    for (const [name, f] of st.frontends) {
      const http = f.mode === 'http' || (f.mode === null && (f.requests || 0) > 0);
      sample.fe.set(name, {
        req: http ? f.requests : f.connTotal,
        bytes: (f.bytesIn ?? 0) + (f.bytesOut ?? 0),
        rate: http ? f.reqRate : f.connRate,
        s5: http ? f.s5xx : null,
      });
    }
    const rates = new Map();
    for (const [name, cur] of sample.fe) {
      const p = this.prev && this.prev.fe.get(name);
      const dt = p ? t - this.prev.t : 0;
      let req = cur.rate;
      if (req === null && p && cur.req !== null && p.req !== null) req = Math.max(0, (cur.req - p.req) / dt);
      const bytes = p ? Math.max(0, (cur.bytes - p.bytes) / dt) : null;
      // 5xx responses per second, from two samples (http frontends).
      const e5 = p && cur.s5 !== null && p.s5 !== null && p.s5 !== undefined ? Math.max(0, (cur.s5 - p.s5) / dt) : null;
      if (req !== null || bytes !== null) rates.set(name, { req, bytes, e5 });
    }
    this.prev = sample;
    this.rates = rates;
    this.history.push({ t, rates });
    while (this.history.length && this.history[0].t < t - HISTORY_S) this.history.shift();
    this.stats = st;
    this.statsAt = now;
    this.statsMissing = false;
    this._updateMode();
    this.dispatchEvent(new Event('stats'));
  }

  // _fill copies into an event's frontends the members it lacks from the
  // last /api/v1/stats, and notes whether it lacked any.
  _fill(st) {
    let lacks = false;
    for (const [name, f] of st.frontends) {
      const p = this._full.frontends.get(name);
      if (!p) continue;
      for (const [has, fields] of Object.entries(MEMBERS)) {
        if (f[has] || !p[has]) continue;
        lacks = true;
        f[has] = true;
        for (const k of fields) f[k] = p[k];
      }
    }
    this._streamLacks = lacks;
  }

  _setMode(m) { this.mode = m; this._updateMode(); }
  _updateMode() { this.dispatchEvent(new Event('mode')); }
}
