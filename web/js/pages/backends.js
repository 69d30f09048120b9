// Backends and their servers: health, connections, weight, admin state.

import { h, clear, badge, modal, num, planList, confirmBox } from '../dom.js';
import { get, request, enc } from '../api.js';
import { input, group, rows, formShell, textArea, getAt, setAt } from '../forms.js';
import { write, act, cell, statKey, paint, subscribe } from '../common.js';
import { loadForEdit, guardedWrite, confirmDelete } from '../conflict.js';

const STATES = [['ready', 'Ready'], ['drain', 'Drain'], ['maint', 'Maint']];
const stateKind = { ready: 'ok', drain: 'warn', maint: 'bad' };

export default async function backends(ctx, root) {
  const list = await get('/api/v1/backends');
  const canAdmin = ctx.can('admin');
  const canServer = ctx.can('server');

  root.append(h('div', { class: 'page-head' },
    h('h1', null, 'Backends'),
    h('div', { class: 'actions' },
      canAdmin ? h('button', { type: 'button', class: 'btn primary', 'data-write': '', id: 'new-backend', onclick: () => openForm(ctx, () => backendForm(ctx, null)) }, 'New backend') : null)));

  if (!list.length) {
    root.append(h('div', { class: 'panel' }, h('p', { class: 'empty' }, 'No backend yet.',
      canAdmin ? ' A backend is a pool of servers; frontends send their connections to one.' : '')));
  }

  for (const b of list) {
    const hc = b.health_check;
    const panel = h('section', { class: 'panel', data: { backend: b.name }, 'aria-label': `Backend ${b.name}` },
      h('div', { class: 'obj-head' },
        h('h2', null, b.name), badge(b.mode), badge(b.balance, 'accent'),
        hc ? badge(`check ${hc.type}${hc.path ? ' ' + hc.path : ''}`) : badge('no health check'),
        h('span', { class: 'be-state', data: { stateOf: b.name } }),
        h('span', { class: 'badge warn stale-note' }, 'stale'),
        canAdmin ? h('div', { class: 'actions' },
          h('button', { type: 'button', class: 'btn small', 'data-write': '', 'data-action': 'add-server', 'aria-label': `Add a server to backend ${b.name}`, onclick: () => openForm(ctx, () => serverForm(ctx, b, null)) }, 'Add server'),
          h('button', { type: 'button', class: 'btn small', 'data-write': '', 'data-action': 'edit-backend', 'aria-label': `Edit backend ${b.name}`, onclick: () => openForm(ctx, () => backendForm(ctx, b)) }, 'Edit'),
          h('button', {
            type: 'button', class: 'btn small danger', 'data-write': '', 'data-action': 'delete-backend', 'aria-label': `Delete backend ${b.name}`,
            onclick: async (e) => {
              if (await confirmDelete(ctx, e.target, `/api/v1/backends/${enc(b.name)}`, `Delete backend ${b.name}?`,
                h('p', null, 'Frontends that use it must be changed first; the API refuses otherwise.'),
                { verb: 'Delete', done: `Deleted backend ${b.name}`, object: `Backend ${b.name}` })) ctx.refresh();
            },
          }, 'Delete')) : null),
      h('div', { class: 'kv' },
        h('span', null, 'connect ', h('b', null, `${num(b.timeouts.connect_ms)} ms`)),
        h('span', null, 'server ', h('b', null, `${num(b.timeouts.server_ms)} ms`)),
        h('span', null, 'queue ', h('b', null, `${num(b.timeouts.queue_ms)} ms`)),
        h('span', null, 'retries ', h('b', null, num(b.retries))),
        h('span', null, 'conns now ', cell('b', statKey('be', b.name, 'connCur'))),
        h('span', null, 'queued ', cell('b', statKey('be', b.name, 'queue'), 'err'))),
      h('div', { class: 'kv', 'aria-label': `Responses and errors of ${b.name}` },
        b.mode === 'http' ? [
          ...['2xx', '3xx', '4xx'].map((c) => h('span', null, `${c} `, cell('b', statKey('be', b.name, 's' + c)))),
          h('span', null, '5xx ', cell('b', statKey('be', b.name, 's5xx'), 'err'))] : null,
        h('span', null, 'no server ', cell('b', statKey('be', b.name, 'noServer'), 'err')),
        h('span', null, 'connect errors ', cell('b', statKey('be', b.name, 'connectErrors'), 'err')),
        b.mode === 'http' ? h('span', { title: 'Bad or cut responses, and none within the server timeout (HAProxy\'s eresp)' }, 'response errors ', cell('b', statKey('be', b.name, 'responseErrors'), 'err')) : null,
        h('span', null, 'retried ', cell('b', statKey('be', b.name, 'retries'), 'err'))),
      hc ? h('p', { class: 'hint check-settings' }, 'Health check: ', checkSettings(hc)) : null,
      serverTable(ctx, b, canAdmin, canServer));
    root.append(panel);
  }
  const onStats = () => { paint(root, ctx.live); paintStates(root, ctx.live); };
  onStats();
  // #/backends/new (the first-visit guide) opens the form at once.
  if (ctx.sub === 'new' && canAdmin) {
    history.replaceState(null, '', '#/backends');
    openForm(ctx, () => backendForm(ctx, null));
  }
  return subscribe(ctx.live, { stats: onStats });
}

// paintStates shows each backend's state: red when no server is usable
// (its clients get 503).
function paintStates(root, live) {
  root.querySelectorAll('[data-state-of]').forEach((el) => {
    const b = live.stats && live.stats.backends.get(el.dataset.stateOf);
    const st = b && b.state;
    const text = st === 'down' ? 'DOWN: no usable server' : st ? `${b.serversUp ?? '?'} usable` : '';
    if (el.textContent === text) return;
    el.textContent = text;
    el.className = 'be-state badge ' + (st === 'down' ? 'bad' : st ? 'ok' : '');
    el.closest('section').classList.toggle('down', st === 'down');
  });
}

// checkSettings says how a backend's health check probes: type, request,
// expected status, interval, timeout, rise and fall.
export function checkSettings(hc) {
  if (!hc) return 'no health check';
  const parts = [hc.type];
  if (hc.type === 'http') {
    parts.push(`${hc.method || 'GET'} ${hc.path || '/'}`);
    if (hc.host) parts.push(`Host ${hc.host}`);
    parts.push(`expects ${hc.status_min || 200}–${hc.status_max || 399}`);
  }
  parts.push(`every ${num(hc.interval_ms)} ms`, `timeout ${num(hc.timeout_ms)} ms`, `rise ${hc.rise}`, `fall ${hc.fall}`);
  return parts.join(' · ');
}

function serverTable(ctx, b, canAdmin, canServer) {
  if (!b.servers.length) return h('p', { class: 'empty' }, 'No server.');
  // An http backend's servers show their requests and 5xx too.
  const http = b.mode === 'http';
  const head = ['Server', 'Address', 'TLS', 'Health', 'State', 'Conns now', 'Total', ...(http ? ['Requests', '5xx', 'Resp. errors'] : []), 'Weight', 'Maxconn'];
  const numCols = new Set(['Conns now', 'Total', 'Requests', '5xx', 'Resp. errors', 'Weight', 'Maxconn']);
  if (canServer) head.push('');
  return h('div', { class: 'tablewrap' }, labelled(h('table', { class: 'stack' },
    h('thead', null, h('tr', null, head.map((t) => h('th', { class: numCols.has(t) ? 'num' : '' }, t)))),
    h('tbody', null, b.servers.map((s) => {
      const id = `${b.name}/${s.name}`;
      const path = `/api/v1/backends/${enc(b.name)}/servers/${enc(s.name)}`;
      let weightCell;
      if (canServer) {
        const w = h('input', { type: 'number', min: '0', max: '256', step: '1', value: String(s.weight ?? ''), 'aria-label': `Weight of ${id}`, 'data-weight': id });
        const set = h('button', { type: 'button', class: 'btn small', 'data-write': '', 'data-action': 'weight', 'data-server': id, 'aria-label': `Set the weight of ${id}` }, 'Set');
        const go = (e) => act(ctx, set, async () => {
          const v = w.value.trim();
          await write(ctx, 'PATCH', path, { weight: /^\d+$/.test(v) ? Number(v) : v }, `Weight of ${id} set to ${v}`);
          ctx.refresh();
        });
        set.addEventListener('click', go);
        w.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); go(); } });
        weightCell = h('td', { class: 'num' }, h('form', { class: 'inline', onsubmit: (e) => e.preventDefault() }, w, set));
      } else {
        weightCell = h('td', { class: 'num' }, num(s.weight));
      }
      return h('tr', { data: { server: id } },
        h('td', null, h('b', null, s.name)),
        h('td', { class: 'mono' }, `${s.address}:${s.port}`),
        h('td', { class: 'tls' }, transportSummary(s)),
        cell('td', statKey('srv', b.name, s.name, 'health'), 'health'),
        h('td', null, badge(s.admin_state, stateKind[s.admin_state] || ''), ' '),
        cell('td', statKey('srv', b.name, s.name, 'connCur'), 'num', { class: 'num' }),
        cell('td', statKey('srv', b.name, s.name, 'connTotal'), 'num', { class: 'num' }),
        http ? [cell('td', statKey('srv', b.name, s.name, 'requests'), 'num', { class: 'num' }),
          cell('td', statKey('srv', b.name, s.name, 's5xx'), 'err', { class: 'num' }),
          cell('td', statKey('srv', b.name, s.name, 'responseErrors'), 'err', { class: 'num' })] : null,
        weightCell,
        h('td', { class: 'num' }, s.maxconn ? num(s.maxconn) : '∞'),
        canServer ? h('td', null, h('div', { class: 'inline' },
          h('div', { class: 'btngroup', role: 'group', 'aria-label': `Admin state of ${id}` }, STATES.map(([st, label]) => h('button', {
            type: 'button', class: 'btn small' + (s.admin_state === st ? ' on' : ''), 'aria-pressed': String(s.admin_state === st),
            'data-write': '', 'data-action': st, 'data-server': id, 'aria-label': `${label} ${id}`,
            onclick: async (e) => {
              const btn = e.currentTarget;
              if (st !== 'ready' && lastUsable(ctx.live, b, s) && !await confirmBox(`${st === 'drain' ? 'Drain' : 'Put in maintenance'} the last usable server of ${b.name}?`,
                h('div', null,
                  h('p', null, `${id} is the only server of ${b.name} that can take traffic now.`),
                  h('p', null, h('b', null, `Clients of ${b.name} will get 503 Service Unavailable`), ' until a server is ready (and up) again.')),
                { ok: st === 'drain' ? 'Drain it' : 'Put in maintenance', danger: true })) { btn.focus(); return; }
              await act(ctx, btn, async () => {
                await write(ctx, 'PATCH', path, { admin_state: st }, `${id} is now ${st}`);
                ctx.refresh();
              });
            },
          }, label))),
          canAdmin ? h('button', { type: 'button', class: 'btn small ghost', 'data-write': '', 'data-action': 'edit-server', 'data-server': id, 'aria-label': `Edit server ${id}`, onclick: () => openForm(ctx, () => serverForm(ctx, b, s)) }, 'Edit') : null,
          canAdmin ? h('button', {
            type: 'button', class: 'btn small ghost danger', 'data-write': '', 'data-action': 'remove-server', 'data-server': id, 'aria-label': `Remove server ${id}`,
            onclick: async (e) => {
              if (await confirmDelete(ctx, e.target, path, `Remove server ${id}?`,
                h('p', null, 'Its live connections continue; it gets no new one.'),
                { verb: 'Remove', done: `Removed server ${id}`, object: `Server ${id}` })) ctx.refresh();
            },
          }, 'Remove') : null)) : null);
    })))));
}

// lastUsable says whether s is the only server of b that takes traffic:
// admin state ready and not down by its health check (from the latest
// stats when there are some, else from the configuration).
function lastUsable(live, b, s) {
  const rb = live.stats && live.stats.backends.get(b.name);
  return leavesNoUsable(b.servers.map((x) => {
    const rs = rb && rb.servers.get(x.name);
    return { name: x.name, admin: (rs && rs.admin) || x.admin_state, up: rs ? rs.up : null };
  }), [s.name]);
}

// leavesNoUsable says whether taking the servers named in going out of
// service (drain or maint) leaves a backend that has a usable server now
// (ready, and not down by its check) with none: its clients get 503.
// servers: [{name, admin, up}] of one backend. The Status page's bulk
// actions ask the same question.
export function leavesNoUsable(servers, going) {
  const usable = (x) => (x.admin || 'ready') === 'ready' && x.up !== false;
  return servers.some(usable) && !servers.some((x) => usable(x) && !going.includes(x.name));
}

// labelled copies each column's heading into data-label of its cells, so
// a .stack table can show one labelled card per row on a phone.
export function labelled(table) {
  const heads = [...table.querySelectorAll('thead th')].map((th) => th.textContent);
  table.querySelectorAll('tbody tr').forEach((tr) => {
    [...tr.children].forEach((td, i) => { td.dataset.label = heads[i] || ''; if (i === 0) td.classList.add('first'); });
  });
  return table;
}

// transportSummary is the TLS cell of a server: its TLS, the PROXY
// protocol header it is sent, and HTTP/2 when it speaks it (proto h2: h2
// by ALPN over TLS, h2c on a clear connection); a dash when none applies.
function transportSummary(s) {
  const parts = [];
  if (s.tls) parts.push(tlsSummary(s.tls));
  if (s.send_proxy) parts.push(`PROXY ${s.send_proxy}`);
  if (s.proto === 'h2') parts.push(s.tls ? 'HTTP/2 (h2)' : 'HTTP/2 (h2c)');
  return parts.length ? parts.join(' · ') : '—';
}

// tlsSummary is the TLS cell of a server: how it is verified, the name
// sent, whether a CA of its own is given; a dash for a plain server.
function tlsSummary(t) {
  if (!t) return '—';
  return `verify ${t.verify || 'required'}${t.sni ? ' · sni ' + t.sni : ''}${t.ca_pem ? ' · own CA' : ''}`;
}

function serverFields(model, base) {
  return [
    input(model, [...base, 'name'], 'Name', 'text', { required: true, placeholder: 's1' }),
    input(model, [...base, 'address'], 'Address', 'text', { required: true, placeholder: '10.0.0.1' }),
    input(model, [...base, 'port'], 'Port', 'int', { min: 1, max: 65535, placeholder: '8080' }),
    input(model, [...base, 'weight'], 'Weight', 'int', { min: 0, max: 256, placeholder: '100' }),
    input(model, [...base, 'maxconn'], 'Maxconn', 'int', { min: 0, placeholder: '0 = no limit' }),
    input(model, [...base, 'admin_state'], 'State', 'select', { options: STATES.map(([v]) => v), default: 'ready' }),
    input(model, [...base, 'send_proxy'], 'PROXY protocol', 'select', {
      options: [['', 'none'], ['v1', 'v1 (text)'], ['v2', 'v2 (binary)']], optional: true,
      hint: 'a header naming the client on each connection (the server must expect it)',
    }),
    input(model, [...base, 'proto'], 'HTTP version', 'select', {
      options: [['', 'default (HTTP/1.1)'], ['h1', 'h1: HTTP/1.1'], ['h2', 'h2: HTTP/2 (gRPC)']], optional: true,
      hint: 'http backends; h2: h2c on a clear connection, h2 by ALPN with TLS',
    }),
    serverTLSFields(model, base),
  ];
}

// serverTLSFields edits the tls member of the server at base (an https
// origin): the checkbox adds it (verify required) or removes it; ca_pem
// is only shown, and only kept, with verify required (the API refuses it
// with none).
function serverTLSFields(model, base) {
  const path = [...base, 'tls'];
  const box = h('div', { class: 'fields' });
  const render = () => {
    clear(box);
    const t = getAt(model, path);
    if (!t) return;
    box.append(
      input(model, [...path, 'verify'], 'Verify', 'select', {
        options: ['required', ['none', 'none (encrypt only)']], default: 'required',
        onchange: (v) => { if (v === 'none') setAt(model, [...path, 'ca_pem'], undefined); render(); },
      }),
      input(model, [...path, 'sni'], 'SNI', 'text', { optional: true, placeholder: 'default: the address', hint: 'the name sent and verified' }),
      t.verify === 'none' ? null
        : textArea(model, [...path, 'ca_pem'], 'CA (PEM)', { placeholder: 'empty: the system roots' }));
  };
  const on = h('input', {
    type: 'checkbox', checked: !!getAt(model, path), 'aria-label': 'Speak TLS to this server',
    onchange: () => { setAt(model, path, on.checked ? { verify: 'required' } : undefined); render(); },
  });
  render();
  const fs = group(path, 'TLS', h('label', { class: 'check' }, on, ' https origin: speak TLS to this server'), box);
  fs.classList.add('tls');
  return fs;
}

function healthFields(model) {
  const box = h('div');
  const render = () => {
    clear(box);
    const hc = model.health_check;
    box.append(h('div', { class: 'fields' },
      input({ t: hc ? hc.type : '' }, ['t'], 'Health check', 'select', {
        options: [['', 'none'], ['tcp', 'tcp connect'], ['http', 'http request']],
        onchange: (v) => {
          if (!v) delete model.health_check;
          else model.health_check = { ...(model.health_check || { interval_ms: 2000, timeout_ms: 1000, rise: 2, fall: 3 }), type: v };
          render();
        },
      }),
      hc ? [
        hc.type === 'http' ? [
          input(model, ['health_check', 'method'], 'Method', 'text', { optional: true, placeholder: 'GET' }),
          input(model, ['health_check', 'path'], 'Path', 'text', { optional: true, placeholder: '/' }),
          input(model, ['health_check', 'host'], 'Host header', 'text', { optional: true, placeholder: 'the server address', hint: 'host[:port]' }),
          input(model, ['health_check', 'status_min'], 'Expected status from', 'int', { min: 100, max: 599, placeholder: '200' }),
          input(model, ['health_check', 'status_max'], 'Expected status to', 'int', { min: 100, max: 599, placeholder: '399' }),
        ] : null,
        input(model, ['health_check', 'interval_ms'], 'Interval (ms)', 'int', { min: 0 }),
        input(model, ['health_check', 'timeout_ms'], 'Timeout (ms)', 'int', { min: 0 }),
        input(model, ['health_check', 'rise'], 'Rise', 'int', { min: 0 }),
        input(model, ['health_check', 'fall'], 'Fall', 'int', { min: 0 }),
      ] : null));
  };
  render();
  return group(['health_check'], 'Health check', box);
}

// openForm opens a form whose loading may fail (the object was deleted
// meanwhile): the failure is a toast, not an unhandled rejection.
export function openForm(ctx, open) { return act(ctx, null, open); }

// backendForm edits b as GET returns it now (with its ETag, sent back as
// If-Match), or creates a backend when b is null.
export async function backendForm(ctx, b) {
  const editing = !!b;
  const ed = editing ? await loadForEdit(`/api/v1/backends/${enc(b.name)}`) : null;
  if (editing) b = ed.data;
  const model = editing ? ed.data : { name: '', mode: 'tcp', balance: 'roundrobin', servers: [{ name: 's1', address: '', port: undefined }], timeouts: {} };
  return modal((close) => {
    const body = h('div', { data: { ptr: '/' } },
      h('div', { class: 'fields' },
        editing ? h('div', { class: 'field', data: { ptr: '/name' } }, h('label', null, 'Name'), h('input', { value: b.name, disabled: true }), h('div', { class: 'err' }))
          : input(model, ['name'], 'Name', 'text', { required: true, placeholder: 'web' }),
        input(model, ['mode'], 'Mode', 'select', { options: ['tcp', 'http'] }),
        input(model, ['balance'], 'Balance', 'select', { options: ['roundrobin', 'leastconn', 'source', 'random'] }),
        input(model, ['retries'], 'Retries', 'int', { min: 0, max: 100, placeholder: '3' })),
      group(['timeouts'], 'Timeouts (ms; empty = default)', h('div', { class: 'fields' },
        input(model, ['timeouts', 'connect_ms'], 'Connect', 'int', { min: 0, placeholder: '5000' }),
        input(model, ['timeouts', 'server_ms'], 'Server', 'int', { min: 0, placeholder: '30000' }),
        input(model, ['timeouts', 'queue_ms'], 'Queue', 'int', { min: 0, placeholder: '5000' }),
        input(model, ['timeouts', 'tunnel_ms'], 'Tunnel', 'int', { min: 0, placeholder: '3600000' }))),
      healthFields(model),
      rows(model, ['servers'], {
        title: 'Servers', add: 'Add server row',
        blank: (i) => ({ name: `s${i + 1}`, address: '', admin_state: 'ready' }),
        rowFn: (p) => serverFields(model, p),
      }));
    return formShell(editing ? `Edit backend ${b.name}` : 'New backend', body, {
      submitLabel: editing ? 'Save' : 'Create', preview: true, onCancel: () => close(),
      onSubmit: async (form, dry) => {
        const path = editing ? `/api/v1/backends/${enc(b.name)}` : '/api/v1/backends';
        const method = editing ? 'PUT' : 'POST';
        if (dry) return previewPlan(form, method, path, model);
        const what = `${editing ? 'Saved' : 'Created'} backend ${model.name}`;
        if (editing) {
          if (!await guardedWrite(ctx, form, ed, method, path, model, what, () => { close(); openForm(ctx, () => backendForm(ctx, b)); })) return;
        } else {
          await write(ctx, method, path, model, what);
        }
        close(true);
        ctx.refresh();
      },
    });
  }, { label: editing ? `Edit backend ${b.name}` : 'New backend', wide: true });
}

export async function previewPlan(form, method, path, body) {
  const r = await request(method, path + (path.includes('?') ? '&' : '?') + 'dry_run=true', body);
  const box = form.querySelector('.plan-preview');
  clear(box).append(h('div', { class: 'notice' }, h('b', null, 'Plan (dry run, nothing changed yet)'), planList(r.data && r.data.plan)));
}

async function serverForm(ctx, b, s) {
  const editing = !!s;
  const ed = editing ? await loadForEdit(`/api/v1/backends/${enc(b.name)}/servers/${enc(s.name)}`) : null;
  if (editing) s = ed.data;
  const model = editing ? ed.data : { name: `s${b.servers.length + 1}`, address: '', admin_state: 'ready' };
  return modal((close) => {
    const fields = serverFields(model, []);
    const tls = fields.pop(); // a fieldset of its own under the grid of fields
    const body = h('div', { data: { ptr: '/' } }, h('div', { class: 'fields' }, fields), tls);
    if (editing) {
      const nameField = body.querySelector('[data-ptr="/name"] input');
      nameField.disabled = true;
    }
    return formShell(editing ? `Edit server ${b.name}/${s.name}` : `Add a server to ${b.name}`, body, {
      submitLabel: editing ? 'Save' : 'Add', preview: true, onCancel: () => close(),
      onSubmit: async (form, dry) => {
        const path = editing ? `/api/v1/backends/${enc(b.name)}/servers/${enc(s.name)}` : `/api/v1/backends/${enc(b.name)}/servers`;
        const method = editing ? 'PUT' : 'POST';
        if (dry) return previewPlan(form, method, path, model);
        const what = `${editing ? 'Saved' : 'Added'} server ${b.name}/${model.name}`;
        if (editing) {
          if (!await guardedWrite(ctx, form, ed, method, path, model, what, () => { close(); openForm(ctx, () => serverForm(ctx, b, s)); })) return;
        } else {
          await write(ctx, method, path, model, what);
        }
        close(true);
        ctx.refresh();
      },
    });
  }, { label: 'Server' });
}
