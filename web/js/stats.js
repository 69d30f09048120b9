// Normalization of /api/v1/stats, /api/v1/activity and stats events into
// one small shape the pages read. The reader is deliberately tolerant: it
// accepts lists of objects with a name or maps keyed by name, and several
// spellings of each counter (HAProxy's and ours), so the page keeps working
// while the stats document grows.

function isObj(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }

// at reads a dotted path.
function at(o, path) {
  let v = o;
  for (const k of path.split('.')) {
    if (!isObj(v)) return undefined;
    v = v[k];
  }
  return v;
}

// n returns the first numeric value among the candidate paths, else null.
export function n(o, ...paths) {
  if (!isObj(o)) return null;
  for (const p of paths) {
    const v = at(o, p);
    if (typeof v === 'number' && Number.isFinite(v)) return v;
    if (typeof v === 'string' && v !== '' && !Number.isNaN(Number(v))) return Number(v);
  }
  return null;
}
function s(o, ...paths) {
  if (!isObj(o)) return null;
  for (const p of paths) {
    const v = at(o, p);
    if (typeof v === 'string') return v;
  }
  return null;
}
function b(o, ...paths) {
  if (!isObj(o)) return null;
  for (const p of paths) {
    const v = at(o, p);
    if (typeof v === 'boolean') return v;
  }
  return null;
}

// list turns [{name..}] or {name: {...}} into [[name, obj]].
function list(v) {
  if (Array.isArray(v)) return v.filter(isObj).map((o, i) => [String(o.name ?? o.id ?? o.thread ?? o.loop ?? i), o]);
  if (isObj(v)) return Object.entries(v).filter(([, o]) => isObj(o)).map(([k, o]) => [String(o.name ?? k), o]);
  return [];
}

function counters(o) {
  const bin = n(o, 'bytes_in', 'bin', 'bytes.in', 'in_bytes', 'traffic.bytes_in', 'bytes_in_total');
  const bout = n(o, 'bytes_out', 'bout', 'bytes.out', 'out_bytes', 'traffic.bytes_out', 'bytes_out_total');
  return {
    connTotal: n(o, 'conns_total', 'connections_total', 'conn_total', 'conn_tot', 'stot', 'connections.total', 'conns.total', 'sessions_total', 'total'),
    connCur: n(o, 'conns_current', 'conns_cur', 'connections_current', 'conn_cur', 'scur', 'cur', 'current', 'connections.current', 'conns.current', 'sessions_current'),
    requests: n(o, 'requests', 'requests_total', 'req_total', 'req_tot', 'requests.total'),
    reqRate: n(o, 'request_rate', 'req_rate', 'rate', 'requests_per_second', 'requests.rate'),
    connRate: n(o, 'conn_rate', 'connection_rate', 'conns_rate', 'connections.rate'),
    bytesIn: bin,
    bytesOut: bout,
    errors: n(o, 'errors', 'errors_total', 'ereq', 'econ', 'errors.total'),
    denied: n(o, 'denied', 'denied_total', 'dreq'),
    queue: n(o, 'queue', 'queue_length', 'qcur', 'queued'),
    rtimeMs: n(o, 'response_time_avg_ms', 'rtime_ms', 'rtime', 'response_time_ms', 'avg_response_ms'),
    s2xx: n(o, 'status.2xx'),
    s3xx: n(o, 'status.3xx'),
    s4xx: n(o, 'status.4xx'),
    s5xx: n(o, 'status.5xx'),
    noServer: n(o, 'no_server'),
    connectErrors: n(o, 'connect_errors'),
    responseErrors: n(o, 'response_errors'),
    retries: n(o, 'retries'),
    timeouts: n(o, 'timeouts'),
    // PROXY protocol headers (frontends with a bind with accept_proxy).
    proxyAccepted: n(o, 'proxy.accepted'),
    proxyRefused: n(o, 'proxy.refused'),
    proxyInvalid: n(o, 'proxy.invalid'),
    proxyTimeouts: n(o, 'proxy.timeouts'),
    // HTTP/2 connections and streams (frontends that speak HTTP/2).
    h2ConnCur: n(o, 'h2.conn_cur'),
    h2StreamsTotal: n(o, 'h2.streams_total'),
    h2StreamsCur: n(o, 'h2.streams_cur'),
    h2Refused: n(o, 'h2.streams_refused'),
    h2ResetsSent: n(o, 'h2.resets_sent'),
    h2ResetsRecv: n(o, 'h2.resets_received'),
    // TLS handshakes (frontends with a TLS bind, servers with tls).
    tlsFull: n(o, 'tls.handshakes_full'),
    tlsResumed: n(o, 'tls.handshakes_resumed'),
    tlsFailed: n(o, 'tls.handshakes_failed'),
    tlsTimeouts: n(o, 'tls.handshake_timeouts'),
    // Which of these members the document has (the page shows a line
    // for each member present).
    // Rules (frontends with rules): totals, and each rule's hits as
    // "rule-<phase>-<index>".
    ruleDenied: n(o, 'rules.denied'),
    ruleRedirected: n(o, 'rules.redirected'),
    ruleRewritten: n(o, 'rules.rewritten'),
    ...ruleHits(o),
    ...limitCounts(o),
    hasProxy: isObj(o.proxy),
    hasH2: isObj(o.h2),
    hasTLS: isObj(o.tls),
    hasRules: isObj(o.rules),
  };
}

// limitCounts flattens a frontend's limits ("limits[i]") into
// "limit-<name>-denied", "-tarpitted", "-refused" and "-entries" members.
function limitCounts(o) {
  const out = {};
  for (const l of Array.isArray(o.limits) ? o.limits : []) {
    if (!isObj(l) || typeof l.name !== 'string') continue;
    out[`limit-${l.name}-denied`] = n(l, 'denied');
    out[`limit-${l.name}-tarpitted`] = n(l, 'tarpitted');
    out[`limit-${l.name}-refused`] = n(l, 'conns_refused');
    out[`limit-${l.name}-entries`] = n(l, 'entries');
  }
  return out;
}

// ruleHits flattens a frontend's per-rule hits ("rules.request[i].hits")
// into "rule-request-<i>" members.
function ruleHits(o) {
  const out = {};
  if (!isObj(o.rules)) return out;
  for (const phase of ['request', 'response']) {
    for (const r of Array.isArray(o.rules[phase]) ? o.rules[phase] : []) {
      if (isObj(r) && typeof r.index === 'number') out[`rule-${phase}-${r.index}`] = typeof r.hits === 'number' ? r.hits : null;
    }
  }
  return out;
}

// MEMBERS are the optional members of a frontend's stats, each with the
// fields read from it: the stats events may carry fewer of them than
// /api/v1/stats (Live fills the missing ones from its last poll).
export const MEMBERS = {
  hasProxy: ['proxyAccepted', 'proxyRefused', 'proxyInvalid', 'proxyTimeouts'],
  hasH2: ['h2ConnCur', 'h2StreamsTotal', 'h2StreamsCur', 'h2Refused', 'h2ResetsSent', 'h2ResetsRecv'],
  hasTLS: ['tlsFull', 'tlsResumed', 'tlsFailed', 'tlsTimeouts'],
  hasRules: ['ruleDenied', 'ruleRedirected', 'ruleRewritten'],
};

// check reads a server's last health check result ("check" member of
// /api/v1/stats); null when the server has no health check.
function check(o) {
  const c = o.check;
  if (!isObj(c)) return { check: null };
  return {
    check: {
      status: s(c, 'status') || '',
      code: n(c, 'code'),
      reason: s(c, 'reason') || '',
      since: s(c, 'since'),
      checkedAt: s(c, 'checked_at'),
      durationMs: n(c, 'duration_ms'),
      type: s(c, 'type'),
      health: n(c, 'health'),
      rise: n(c, 'rise'),
      fall: n(c, 'fall'),
    },
  };
}

// health reads a server's two facts apart: its health (up, down) and its
// admin state (ready, drain, maint). "state" mixes them (health first: a
// down server's is "down" whatever its admin state, an up drained one's
// "drain"), so it is read for the health only when it is a health word,
// and for the admin state only when it is an admin word; "up" and
// "admin_state" win when present.
function health(o) {
  const up = b(o, 'up', 'health.up', 'healthy');
  const st = s(o, 'health', 'health_state', 'status', 'check_status', 'state', 'health.state');
  let state = st ? st.toLowerCase() : null;
  const adminWord = state && /^(drain|maint|ready)/.test(state) ? state : null;
  if (adminWord) state = null; // an admin state says nothing of the health
  if (!state && up !== null) state = up ? 'up' : 'down';
  let upv = up;
  if (upv === null && state) upv = /^(up|ok|healthy|no.?check)/.test(state);
  return {
    up: upv,
    health: up !== null ? (up ? 'up' : 'down') : state,
    admin: s(o, 'admin_state', 'admin') ?? adminWord,
    weight: n(o, 'weight', 'eweight'),
    lastChange: s(o, 'last_change', 'last_state_change', 'lastchg') ?? n(o, 'last_change_s', 'lastchg_s'),
  };
}

// normStats reads a stats document (or a stats event payload).
export function normStats(raw) {
  const doc = isObj(raw) && isObj(raw.stats) ? raw.stats : raw;
  const out = { frontends: new Map(), backends: new Map(), loops: null, time: Date.now() };
  if (!isObj(doc)) return out;
  const t = typeof doc.time === 'string' ? Date.parse(doc.time) : NaN;
  if (Number.isFinite(t)) out.time = t;
  for (const [name, o] of list(doc.frontends)) out.frontends.set(name, { name, mode: s(o, 'mode'), ...counters(o) });
  for (const [name, o] of list(doc.backends)) {
    const be = { name, ...counters(o), state: s(o, 'state'), serversUp: n(o, 'servers_up'), servers: new Map() };
    for (const [sn, so] of list(o.servers)) be.servers.set(sn, { name: sn, ...counters(so), ...health(so), ...check(so) });
    out.backends.set(name, be);
  }
  // Servers may also come as a flat list with a backend field.
  // Servers may also come as a flat list, named "backend/server" (the
  // stats event) or with a backend field.
  for (const [full, so] of list(doc.servers)) {
    let bn = s(so, 'backend');
    let sn = s(so, 'server') || full;
    if (!bn) {
      const i = full.indexOf('/');
      if (i < 0) continue;
      bn = full.slice(0, i);
      sn = full.slice(i + 1);
    }
    if (!out.backends.has(bn)) out.backends.set(bn, { name: bn, servers: new Map() });
    out.backends.get(bn).servers.set(sn, { name: sn, ...counters(so), ...health(so), ...check(so) });
  }
  const loops = doc.loops ?? doc.threads ?? doc.activity;
  if (loops !== undefined) out.loops = normActivity(loops);
  return out;
}

// normActivity reads /api/v1/activity: a list of loops, or {loops: [...]}.
export function normActivity(raw) {
  const src = isObj(raw) && (raw.loops || raw.threads) ? (raw.loops || raw.threads) : raw;
  return list(src).map(([name, o], i) => {
    const t = at(o, 'tasklets');
    let tasklets = null;
    if (Array.isArray(t)) tasklets = t.map(Number);
    else if (isObj(t)) tasklets = [n(t, 'urgent') ?? 0, n(t, 'normal') ?? 0, n(t, 'bulk') ?? 0];
    else {
      const u = n(o, 'tasklets_urgent'); const no = n(o, 'tasklets_normal'); const bu = n(o, 'tasklets_bulk');
      if (u !== null || no !== null || bu !== null) tasklets = [u ?? 0, no ?? 0, bu ?? 0];
    }
    return {
      id: n(o, 'id', 'loop', 'thread') ?? i,
      name,
      cpu: o.cpus ?? o.cpu ?? null,
      loops: n(o, 'loops'),
      pollIO: n(o, 'poll_io'),
      wakeTasks: n(o, 'wake_tasks'),
      tasklets,
      avgLoopUs: n(o, 'avg_loop_us'),
      shares: n(o, 'share_urgent') === null ? null : [n(o, 'share_urgent'), n(o, 'share_normal') ?? 0, n(o, 'share_bulk') ?? 0],
      handshakeNs: n(o, 'cpu_handshake_ns'),
      accepted: n(o, 'accepted'),
      accqPushed: n(o, 'accq_pushed'),
      accqFull: n(o, 'accq_full'),
      spliceBytes: n(o, 'splice_bytes'),
      pipesUsed: n(o, 'pipes_used'),
      conns: n(o, 'conns', 'connections', 'conns_current'),
      buffers: n(o, 'buffers_used', 'buffers'),
    };
  });
}
