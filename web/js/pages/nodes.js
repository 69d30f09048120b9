// Nodes: the configuration store (the local state directory, or etcd
// shared by several nodes: --store etcd://…), this node, and every live
// node with the generation it runs against the store's, its state and the
// error of a refusal in full. GET /api/v1/cluster is read again every 3 s
// (one small document); the tables are redrawn only when it changed, and
// the focus stays on the control that had it.

import { h, clear, badge, ago, num, confirmBox, when as stamp } from '../dom.js';
import { get, tryGet, loginShown, request } from '../api.js';
import { noteStore } from '../cluster.js';
import { notAvailable, act, write } from '../common.js';
import { openSettings } from './nodesettings.js';

const POLL_MS = 3000;

// stateBadge: the node states in the colours of the rest of the page
// (green in sync, amber behind, red refused or unreachable, grey
// starting), each with what it means in its title. The node that answers
// works each state out (a stopped node's own last word would be in_sync).
const STATES = {
  in_sync: ['in sync', 'ok', 'runs the store\'s generation'],
  applying: ['applying', 'warn', 'behind the store\'s generation: applying it, or about to'],
  refused: ['refused', 'bad', 'refused the store\'s generation: runs its last good one'],
  starting: ['starting', '', 'registered, its first apply not done'],
  unreachable: ['unreachable', 'bad', 'has not renewed its entry in time: stopped, killed or cut from the store; it leaves the list when its lease expires'],
};
export function stateBadge(st) {
  const [text, kind, title] = STATES[st] || [st || 'unknown', '', ''];
  const b = badge(text, kind);
  b.dataset.state = st || '';
  if (title) b.title = title;
  return b;
}

// unreachableNote says, under an unreachable node's row, since when.
function unreachableNote(n) {
  const secs = n.renew_ms ? Math.round(n.renew_ms / 1000) : 0;
  return h('div', { class: 'check-why' }, h('b', null, `${n.name} is unreachable`),
    `: its entry was last renewed `, when(n.updated), secs ? ` (it renews it at least every ${secs} s)` : '',
    '; stopped, killed or cut from the store. It leaves the list when its lease expires; writes wait for it meanwhile.');
}

// adminLink links to another node's admin page when its address names a
// host (not a wildcard such as 0.0.0.0 or :9900).
function adminLink(addr) {
  if (!addr) return h('span', { class: 'muted' }, '—');
  const m = /^(\[[^\]]*\]|[^:]*):(\d+)$/.exec(addr);
  const host = m ? m[1].replace(/^\[|\]$/g, '') : '';
  if (!m || host === '' || host === '0.0.0.0' || host === '::' || addr.startsWith('unix:') || addr.startsWith('/')) return h('code', null, addr);
  return h('a', { href: `${location.protocol}//${addr}/ui/#/nodes`, 'data-action': 'admin-link', 'data-node': addr }, h('code', null, addr));
}

function when(t) {
  if (!t || String(t).startsWith('0001-')) return h('span', { class: 'muted' }, '—');
  const d = new Date(t);
  return h('span', { data: { ago: t }, title: Number.isNaN(d.getTime()) ? String(t) : stamp(d) }, ago(t));
}

export default async function nodes(ctx, root) {
  // /api/v1/cluster, or (an older build without it) what /api/v1/info says.
  const load = async () => {
    const r = await tryGet('/api/v1/cluster');
    if (r.ok) return r.data;
    const info = await get('/api/v1/info');
    return { missing: true, info, store: info.store || { kind: 'dir', connected: true }, self: info.node || null, generation: info.generation, nodes: [] };
  };
  let data = await load();
  const info = ctx.info || {};

  const head = h('div', { class: 'page-head' }, h('h1', null, 'Nodes'), h('span', { class: 'muted', id: 'nodes-summary' }));
  const storeBox = h('section', { class: 'panel', id: 'nodes-store', 'aria-labelledby': 'nodes-store-h' });
  const selfBox = h('section', { class: 'panel', id: 'nodes-self', 'aria-labelledby': 'nodes-self-h' });
  const listBox = h('section', { class: 'panel', id: 'nodes-list', 'aria-labelledby': 'nodes-list-h' });
  root.append(head, h('div', { class: 'grid two' }, storeBox, selfBox), listBox);

  const storeGen = (d) => (d.store && d.store.generation) || d.generation || 0;

  const drawStore = (d) => {
    const st = d.store || {};
    clear(storeBox).append(h('h2', { id: 'nodes-store-h' }, 'Configuration store'));
    if (st.kind === 'dir' || !st.kind) {
      storeBox.append(
        h('div', { class: 'kv' },
          h('span', null, 'kind ', h('b', { 'data-store-kind': 'dir' }, 'dir')),
          info.state_dir ? h('span', null, 'directory ', h('b', { class: 'mono' }, info.state_dir)) : null,
          h('span', null, 'generation ', h('b', null, num(storeGen(d))))),
        h('p', { id: 'nodes-dir-note' }, 'The store is this node\'s local state directory: a single node. ',
          'To share one configuration among several nodes, start each with ', h('code', null, '--store etcd://host:2379/prefix'),
          ': see the Cluster section of the README.'));
      return;
    }
    storeBox.append(h('div', { class: 'kv' },
      h('span', null, 'kind ', h('b', { 'data-store-kind': st.kind }, st.kind)),
      st.endpoints && st.endpoints.length ? h('span', null, 'endpoints ', h('b', { class: 'mono' }, st.endpoints.join(', '))) : null,
      st.prefix ? h('span', null, 'prefix ', h('b', { class: 'mono' }, st.prefix)) : null,
      h('span', null, 'newest generation ', h('b', { id: 'store-generation' }, num(storeGen(d))))),
    h('div', { class: 'kv', id: 'store-state' }, st.connected
      ? [badge('connected', 'ok'), st.since ? h('span', null, 'since ', when(st.since)) : null]
      : [badge('unreachable', 'bad'), h('span', null, 'since ', when(st.since)),
        h('span', null, 'this node serves its copy; writes are refused (HTTP 503)')]));
    // etcd went back (restored from an older snapshot): writes are 409
    // store-behind until an admin reseeds it with this node's generation.
    if (st.behind) {
      storeBox.append(h('div', { class: 'kv', id: 'store-behind' }, badge('behind', 'bad'),
        h('span', null, 'the store holds an older generation than this node runs (etcd restored from an older snapshot?): writes are refused (HTTP 409)'),
        ctx.can('admin') ? h('button', { type: 'button', class: 'btn small', 'data-write': '', 'data-action': 'reseed',
          onclick: (e) => reseed(e.currentTarget) }, 'Reseed…') : null));
    }
  };

  // reseed asks first, saying what the dry run says, then writes.
  const reseed = (button) => act(ctx, button, async () => {
    const dry = (await request('POST', '/api/v1/cluster/reseed?dry_run=true')).data;
    const held = dry.store_generation ? `generation ${num(dry.store_generation)}` : 'no document';
    const ok = await confirmBox('Reseed the store with this node\'s configuration?', h('p', { id: 'reseed-preview' },
      `This node's generation ${num(dry.node_generation)}, unchanged, becomes the store's generation ${num(dry.generation)} `,
      `(the store holds ${held}); every node adopts it.`), { ok: 'Reseed' });
    if (!ok) return;
    await write(ctx, 'POST', '/api/v1/cluster/reseed', undefined, 'Store reseeded');
    data = await load();
    if (root.isConnected) draw(data);
  });

  const drawSelf = (d) => {
    const self = d.self || {};
    const me = (d.nodes || []).find((n) => n.name === self.name);
    clear(selfBox).append(h('h2', { id: 'nodes-self-h' }, 'This node'),
      h('div', { class: 'kv' },
        h('span', null, 'name ', h('b', { id: 'self-name' }, self.name || '—')),
        h('span', null, 'address ', h('b', { class: 'mono' }, self.address || h('span', { class: 'muted' }, 'none (--node-address)'))),
        h('span', null, 'admin ', h('b', { class: 'mono' }, info.admin_addr || (me && me.admin_address) || '—')),
        h('span', null, 'runs generation ', h('b', null, num(me ? me.running_generation : (info.running_generation ?? info.generation))))),
      me ? h('div', { class: 'kv' }, stateBadge(me.state), me.error ? h('span', { class: 'check-why' }, me.error) : null) : '');
  };

  const drawList = (d) => {
    const list = d.nodes || [];
    const sg = storeGen(d);
    const self = (d.self && d.self.name) || '';
    // Node-local settings (nbthread, cpu_map, irq per node): admins, in
    // cluster mode (on a single node the Tuning and CPU pages set them).
    const settings = ctx.can('admin') && d.store && d.store.kind && d.store.kind !== 'dir';
    clear(listBox).append(h('h2', { id: 'nodes-list-h' }, `Live nodes (${list.length})`));
    if (d.missing) {
      listBox.append(notAvailable('the nodes', '/api/v1/cluster'));
      return;
    }
    if (!list.length) {
      listBox.append(h('p', { class: 'empty' }, 'No live node is registered in the store.'));
      return;
    }
    listBox.append(h('div', { class: 'tablewrap' }, h('table', { id: 'nodes-table', class: 'stack nodes' },
      h('thead', null, h('tr', null, ['Node', 'Address', 'Admin', 'Generation', 'State', 'Version', 'Started', 'Updated', settings ? '' : null]
        .filter((t) => t !== null).map((t) => h('th', { class: t === 'Generation' ? 'num' : '' }, t)))),
      h('tbody', null, list.map((n) => {
        const behind = sg && n.running_generation < sg;
        return [h('tr', { class: n.state === 'refused' || n.state === 'unreachable' ? 'down' : '', data: { node: n.name, state: n.state || '' } },
          h('td', { class: 'first', 'data-label': 'Node' }, h('b', null, n.name), n.name === self ? [' ', badge('this node', 'accent')] : null),
          h('td', { class: 'mono', 'data-label': 'Address' }, n.address || '—'),
          h('td', { 'data-label': 'Admin' }, adminLink(n.admin_address)),
          h('td', { class: 'num', 'data-label': 'Generation' },
            h('span', { class: behind ? 'bad-v' : '', 'data-running': String(n.running_generation) }, num(n.running_generation)),
            sg ? h('span', { class: 'muted' }, ` of ${num(sg)}`) : null),
          h('td', { 'data-label': 'State' }, stateBadge(n.state)),
          h('td', { class: 'mono', 'data-label': 'Version' }, n.version || '—'),
          h('td', { class: 'nowrap', 'data-label': 'Started' }, when(n.started)),
          h('td', { class: 'nowrap', 'data-label': 'Updated', 'data-updated': '' }, when(n.updated)),
          settings ? h('td', { 'data-label': '' }, h('button', {
            type: 'button', class: 'btn small', 'data-write': '', 'data-action': 'node-settings', 'data-node': n.name,
            'aria-label': `Node-local settings of ${n.name}`, onclick: () => openSettings(ctx, n.name),
          }, 'Settings…')) : null),
        n.error ? h('tr', { class: 'node-error', data: { nodeError: n.name } },
          h('td', { colspan: settings ? '9' : '8', 'data-label': '' }, h('div', { class: 'check-why' },
            h('b', null, `${n.name} refused generation ${n.refused_generation || '?'}`), ` (runs ${n.running_generation}): `,
            h('span', { class: 'node-err-text' }, n.error)))) : null,
        n.state === 'unreachable' ? h('tr', { class: 'node-unreachable', data: { nodeUnreachable: n.name } },
          h('td', { colspan: settings ? '9' : '8', 'data-label': '' }, unreachableNote(n))) : null];
      })))));
  };

  const drawHead = (d) => {
    const list = d.nodes || [];
    const c = (s) => list.filter((n) => n.state === s).length;
    const el = head.querySelector('#nodes-summary');
    const parts = [`${list.length} live`];
    if (c('in_sync')) parts.push(`${c('in_sync')} in sync`);
    if (c('applying') + c('starting')) parts.push(`${c('applying') + c('starting')} applying`);
    if (c('refused')) parts.push(`${c('refused')} refused`);
    if (c('unreachable')) parts.push(`${c('unreachable')} unreachable`);
    el.textContent = d.missing ? '' : parts.join(' · ');
  };

  // The times of the nodes' last updates change at each read (a node's
  // heartbeat): they are set in place; anything else redraws the tables.
  const paintUpdated = (d) => {
    for (const n of d.nodes || []) {
      const el = listBox.querySelector(`tr[data-node="${CSS.escape(n.name)}"] [data-updated]`);
      if (el && n.updated && el.firstChild && el.firstChild.dataset && el.firstChild.dataset.ago !== n.updated) el.replaceChildren(when(n.updated));
    }
  };
  let shown = '';
  const draw = (d) => {
    const key = JSON.stringify(d, (k, v) => (k === 'updated' ? undefined : v));
    if (key === shown) { paintUpdated(d); return; }
    shown = key;
    // The control that has the focus is found again in the new tables.
    const a = document.activeElement;
    const keep = a && root.contains(a) && a.dataset && a.dataset.action
      ? `[data-action="${CSS.escape(a.dataset.action)}"]${a.dataset.node ? `[data-node="${CSS.escape(a.dataset.node)}"]` : ''}` : null;
    drawHead(d); drawStore(d); drawSelf(d); drawList(d);
    noteStore(d.store);
    if (keep && !root.contains(document.activeElement)) {
      const el = root.querySelector(keep);
      if (el) el.focus();
    }
  };
  draw(data);

  let busy = false;
  const timer = setInterval(async () => {
    if (busy || document.hidden || loginShown() || !root.isConnected) return;
    busy = true;
    try {
      data = await load();
      if (root.isConnected) draw(data);
    } catch { /* the live indicator and the banner say why */ }
    finally { busy = false; }
  }, POLL_MS);
  return () => clearInterval(timer);
}
