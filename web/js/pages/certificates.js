// Certificates: a read-only list of the TLS certificates' metadata (the
// API never answers a key). Upload, replace and delete go through the API
// (curl): see the README's Certificates section.

import { h, badge } from '../dom.js';
import { get } from '../api.js';

// SOON is when an expiry turns red: /readyz warns from 14 days.
const SOON = 14 * 24 * 3600 * 1000;

export default async function certificates(ctx, root) {
  root.append(h('div', { class: 'page-head' }, h('h1', null, 'Certificates'),
    h('span', { class: 'muted' }, 'metadata only; upload with POST /api/v1/certificates')));
  const list = await get('/api/v1/certificates');
  const panel = h('section', { class: 'panel', id: 'certificates' });
  root.append(panel);
  if (!list.length) { panel.append(h('p', { class: 'empty' }, 'No certificate yet.')); return; }
  const now = Date.now();
  panel.append(h('div', { class: 'tablewrap' }, h('table', { id: 'cert-table' },
    h('thead', null, h('tr', null, ['Name', 'Subject', 'SANs', 'Expires', 'Key', 'Used by'].map((t) => h('th', null, t)))),
    h('tbody', null, list.map((c) => {
      const left = Date.parse(c.not_after) - now;
      const exp = left < SOON ? badge(c.not_after + (left < 0 ? ' (expired)' : ''), 'bad') : c.not_after;
      return h('tr', { data: { name: c.name } },
        h('td', null, c.name), h('td', null, c.subject), h('td', null, (c.sans || []).join(', ')),
        h('td', null, exp), h('td', null, c.key_type + ' · chain ' + c.chain_length),
        h('td', null, (c.used_by || []).join(', ') || '—'));
    })))));
}
