// Certificates: the TLS certificates' metadata (the API never answers a
// key), and for admins upload, replace and delete. The upload form takes
// pasted PEM or chosen files (a file may hold the chain, the key or both)
// and shows what the API parsed (names, issuer, expiry, key) from a dry
// run before anything is stored.

import { h, badge, modal, confirmBox, when } from '../dom.js';
import { get, request, enc, ApiError } from '../api.js';
import { input, listInput, textArea, formShell } from '../forms.js';
import { write, act } from '../common.js';
import { openForm } from './backends.js';

// SOON is when an expiry turns red: /readyz warns from 14 days.
const SOON = 14 * 24 * 3600 * 1000;

export default async function certificates(ctx, root) {
  const canAdmin = ctx.can('admin');
  root.append(h('div', { class: 'page-head' }, h('h1', null, 'Certificates'),
    canAdmin ? h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'btn', id: 'managed-cert', 'data-write': '', onclick: () => openForm(ctx, () => acmeForm(ctx)) }, 'Managed (ACME)…'),
      h('button', { type: 'button', class: 'btn primary', id: 'upload-cert', 'data-write': '', onclick: () => openForm(ctx, () => certForm(ctx, null)) }, 'Upload certificate'))
      : h('span', { class: 'muted' }, 'metadata only; an admin uploads them')));
  const list = await get('/api/v1/certificates');
  const notice = h('div', { id: 'cert-notice' });
  const panel = h('section', { class: 'panel', id: 'certificates' }, notice);
  root.append(panel);
  if (!list.length) {
    panel.append(h('p', { class: 'empty' }, 'No certificate yet.', canAdmin ? ' Upload one (PEM chain and key) to terminate TLS on a bind.' : ''));
    return undefined;
  }
  panel.append(h('div', { class: 'tablewrap' }, h('table', { id: 'cert-table' },
    h('thead', null, h('tr', null, ['Name', 'Subject', 'SANs', 'Expires', 'Key', 'ACME', 'Used by', ...(canAdmin ? [''] : [])].map((t) => h('th', null, t)))),
    h('tbody', null, list.map((c) => h('tr', { data: { name: c.name } },
      h('td', null, c.name), h('td', null, c.subject || '—'), h('td', null, (c.sans || []).join(', ') || '—'),
      h('td', null, c.not_after ? expiry(c.not_after) : '—'), h('td', null, c.key_type ? c.key_type + ' · chain ' + c.chain_length : '—'),
      h('td', { class: 'acme-state' }, acmeState(c.acme)),
      h('td', null, (c.used_by || []).join(', ') || '—'),
      canAdmin ? h('td', null, h('div', { class: 'inline' },
        h('button', {
          type: 'button', class: 'btn small ghost', 'data-write': '', 'data-action': 'replace-cert', 'data-name': c.name,
          'aria-label': `Replace certificate ${c.name}`, onclick: () => openForm(ctx, () => certForm(ctx, c)),
        }, 'Replace…'),
        h('button', {
          type: 'button', class: 'btn small ghost danger', 'data-write': '', 'data-action': 'delete-cert', 'data-name': c.name,
          'aria-label': `Delete certificate ${c.name}`, onclick: (e) => deleteCert(ctx, e.currentTarget, c, notice),
        }, 'Delete'))) : null))))));
  // A managed certificate being ordered changes state within seconds:
  // the page reads the list again every 2 s until none is (stopped when
  // the page is left).
  if (list.some((c) => c.acme && (c.acme.status === 'pending' || c.acme.status === 'renewing'))) {
    const timer = setTimeout(() => ctx.refresh(), 2000);
    return () => clearTimeout(timer);
  }
  return undefined;
}

// acmeState shows a managed certificate's run-time state: its status,
// the next renewal (or retry) and the CA's last problem; "uploaded" for
// the others.
function acmeState(a) {
  if (!a) return h('span', { class: 'muted' }, 'uploaded');
  const kind = { valid: 'ok', failed: 'bad', renewing: 'warn', pending: 'warn' }[a.status] || '';
  return h('div', null,
    badge(a.status, kind), ' ', h('span', { class: 'muted' }, `${a.challenge} · ${(a.domains || []).join(', ')}`),
    a.next_renewal_at ? h('div', { class: 'muted' }, 'renews ', when(a.next_renewal_at)) : null,
    a.retry_at ? h('div', { class: 'muted' }, 'retry ', when(a.retry_at)) : null,
    a.error ? h('div', { class: 'acme-error', title: a.error.type }, a.error.detail) : null);
}

// acmeForm creates a managed certificate: spliced orders it from the ACME
// server and renews it; the EAB HMAC key is sent once, never shown again.
function acmeForm(ctx) {
  const model = { name: '', acme: { domains: undefined, directory: 'https://acme-v02.api.letsencrypt.org/directory', challenge: 'http-01', key_type: 'ecdsa-p256' } };
  const eab = { kid: '', hmac_key: '' };
  return modal((close) => {
    const hmac = h('input', { type: 'password', autocomplete: 'new-password', id: 'acme-eab-hmac' });
    hmac.addEventListener('input', () => { eab.hmac_key = hmac.value; });
    const kid = h('input', { type: 'text', autocomplete: 'off', id: 'acme-eab-kid' });
    kid.addEventListener('input', () => { eab.kid = kid.value; });
    const body = h('div', { data: { ptr: '/' } },
      h('div', { class: 'fields' },
        input(model, ['name'], 'Name', 'text', { required: true, placeholder: 'site' }),
        listInput(model, ['acme', 'domains'], 'Domains', { placeholder: 'example.com, www.example.com', hint: 'No wildcard: dns-01 is not answered.' }),
        input(model, ['acme', 'directory'], 'ACME directory URL', 'text', { required: true }),
        input(model, ['acme', 'email'], 'Contact e-mail', 'text', { optional: true, placeholder: 'ops@example.com' }),
        input(model, ['acme', 'challenge'], 'Challenge', 'select', { options: [['http-01', 'http-01 (clear binds of http frontends)'], ['tls-alpn-01', 'tls-alpn-01 (TLS binds)']] }),
        input(model, ['acme', 'key_type'], 'Key', 'select', { options: ['ecdsa-p256', 'rsa-2048'] })),
      textArea(model, ['acme', 'directory_ca_pem'], 'Directory CA (PEM, optional)', { rows: 3, hint: 'To trust a private ACME server\'s HTTPS.' }),
      h('fieldset', { class: 'group', data: { ptr: '/acme/eab' } }, h('legend', null, 'External account binding (optional)'),
        h('div', { class: 'fields' },
          h('div', { class: 'field', data: { ptr: '/acme/eab/kid' } }, h('label', { for: 'acme-eab-kid' }, 'Key id'), kid, h('div', { class: 'err' })),
          h('div', { class: 'field', data: { ptr: '/acme/eab/hmac_key' } }, h('label', { for: 'acme-eab-hmac' }, 'HMAC key'), hmac,
            h('div', { class: 'hint' }, 'Write-only: stored with the account key, never shown again.'), h('div', { class: 'err' })))),
      h('p', { class: 'hint' }, 'spliced orders the certificate at once and renews it at two thirds of its lifetime; binds may name it now and serve it once issued.'));
    const send = () => {
      const m = JSON.parse(JSON.stringify(model));
      if (eab.kid || eab.hmac_key) m.acme.eab = { kid: eab.kid, hmac_key: eab.hmac_key };
      return m;
    };
    return formShell('New managed certificate (ACME)', body, {
      submitLabel: 'Create', preview: true, previewLabel: 'Check (dry run)', onCancel: () => close(),
      onSubmit: async (f, dry) => {
        if (dry) {
          await request('POST', '/api/v1/certificates?dry_run=true', send());
          f.querySelector('.plan-preview').replaceChildren(h('div', { class: 'notice' }, 'Valid: the API accepts it (nothing stored, nothing ordered yet).'));
          return;
        }
        await write(ctx, 'POST', '/api/v1/certificates', send(), `Created managed certificate ${model.name}: ordering`);
        close(true);
        ctx.refresh();
      },
    });
  }, { label: 'New managed certificate (ACME)', wide: true });
}

// expiry is an expiry date, red (with "expired") within 14 days.
function expiry(notAfter) {
  const left = Date.parse(notAfter) - Date.now();
  const text = when(notAfter);
  if (!(left < SOON)) return h('span', { title: notAfter }, text, h('span', { class: 'muted' }, ` (${Math.round(left / 86400000)} days)`));
  return badge(text + (left < 0 ? ' (expired)' : ` (${Math.max(0, Math.round(left / 86400000))} days)`), 'bad');
}

// deleteCert asks, then deletes; a certificate still used by a bind is
// refused (409): the notice says so, naming the binds, and stays.
async function deleteCert(ctx, button, c, notice) {
  const used = c.used_by || [];
  if (!await confirmBox(`Delete certificate ${c.name}?`,
    used.length ? h('p', { class: 'notice warn' }, `Used by ${used.join(', ')}: the API refuses to delete it until those binds stop using it.`)
      : h('p', null, 'No bind uses it. Its file stays in the state directory for the revisions that refer to it.'),
    { ok: 'Delete', danger: true })) { button.focus(); return; }
  notice.replaceChildren();
  await act(ctx, button, async () => {
    try {
      await write(ctx, 'DELETE', `/api/v1/certificates/${enc(c.name)}`, undefined, `Deleted certificate ${c.name}`);
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 409) throw e;
      const users = (e.errors || []).map((x) => x.message.replace(/ uses it$/, ''));
      notice.replaceChildren(h('div', { class: 'notice bad', role: 'alert', 'data-in-use': c.name, tabindex: '-1' },
        h('b', null, `Certificate ${c.name} is in use: not deleted`), ' (HTTP 409). ',
        users.length ? ['Used by ', users.map((u, i) => [i ? ', ' : '', h('code', null, u)]), '. '] : `${e.message}. `,
        'Take it out of those binds (Frontends) first.'));
      notice.firstChild.focus();
      return;
    }
    ctx.refresh();
  });
}

// pemBlocks splits PEM text into its blocks: [{type, text}].
function pemBlocks(text) {
  const out = [];
  const re = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g;
  for (const m of text.matchAll(re)) out.push({ type: m[1], text: m[0] });
  return out;
}

// certForm uploads a certificate, or replaces c: the chain and the key,
// pasted or read from files; "Check" runs the write as a dry run and shows
// what the API parsed from them.
function certForm(ctx, c) {
  const replacing = !!c;
  const model = { name: replacing ? c.name : '', cert_pem: '', key_pem: '' };
  return modal((close) => {
    const certArea = textArea(model, ['cert_pem'], 'Certificate chain (PEM)', { rows: 6, placeholder: '-----BEGIN CERTIFICATE-----  (the leaf first, then its issuers)' });
    const keyArea = textArea(model, ['key_pem'], 'Private key (PEM)', { rows: 4, placeholder: '-----BEGIN PRIVATE KEY-----' });
    const setArea = (field, key, v) => {
      model[key] = v;
      const ta = field.querySelector('textarea');
      ta.value = v;
    };
    const fileNote = h('div', { class: 'hint', id: 'cert-files-note', 'aria-live': 'polite' });
    const files = h('input', {
      type: 'file', multiple: true, accept: '.pem,.crt,.cer,.key,.chain,text/plain', id: 'cert-files', 'aria-describedby': 'cert-files-note',
      onchange: async () => {
        // Each chosen file may hold certificates, a key, or both: the
        // certificates go to the chain (in the files' order), the key to
        // the key.
        const certs = []; const keys = []; const names = [];
        for (const f of files.files) {
          const blocks = pemBlocks(await f.text());
          names.push(`${f.name} (${blocks.map((b) => b.type.toLowerCase()).join(', ') || 'no PEM block'})`);
          for (const b of blocks) (/PRIVATE KEY$/.test(b.type) ? keys : certs).push(b.text);
        }
        if (certs.length) setArea(certArea, 'cert_pem', certs.join('\n') + '\n');
        if (keys.length) setArea(keyArea, 'key_pem', keys[0] + '\n');
        fileNote.textContent = `Read ${names.join('; ')}.` + (keys.length > 1 ? ' More than one key: the first is used.' : '');
        if (model.cert_pem && model.key_pem) form.querySelector('[data-action="preview"]').click();
      },
    });
    const body = h('div', { data: { ptr: '/' } },
      h('div', { class: 'fields' },
        replacing ? h('div', { class: 'field', data: { ptr: '/name' } }, h('label', null, 'Name'), h('input', { value: c.name, disabled: true }), h('div', { class: 'err' }))
          : input(model, ['name'], 'Name', 'text', { required: true, placeholder: 'site' })),
      h('div', { class: 'field' }, h('label', { for: 'cert-files' }, 'PEM files'), files,
        h('div', { class: 'hint' }, 'Choose the chain and key files (or one file with both), or paste them below.'), fileNote),
      certArea, keyArea,
      replacing ? h('p', { class: 'hint' }, `Binds that use ${c.name} serve the new chain as soon as it is saved; the old one stays in the state directory for the revisions that refer to it.`) : null);
    const path = replacing ? `/api/v1/certificates/${enc(c.name)}` : '/api/v1/certificates';
    const method = replacing ? 'PUT' : 'POST';
    const form = formShell(replacing ? `Replace certificate ${c.name}` : 'Upload a certificate', body, {
      submitLabel: replacing ? 'Replace' : 'Upload', preview: true, previewLabel: 'Check (dry run)', onCancel: () => close(),
      onSubmit: async (f, dry) => {
        if (dry) {
          const r = await request(method, path + '?dry_run=true', model);
          f.querySelector('.plan-preview').replaceChildren(parsed(r.data && r.data.result, c));
          return;
        }
        await write(ctx, method, path, model, `${replacing ? 'Replaced' : 'Uploaded'} certificate ${model.name}`);
        close(true);
        ctx.refresh();
      },
    });
    return form;
  }, { label: replacing ? `Replace certificate ${c.name}` : 'Upload a certificate', wide: true });
}

// parsed shows what the API read from an upload (a dry run's result): the
// names it serves, who issued it, its validity and key; when replacing,
// the names it had before.
function parsed(info, old) {
  if (!info) return h('div', { class: 'notice' }, 'Valid: the API accepts it (nothing stored yet).');
  const row = (k, v) => h('tr', null, h('th', null, k), h('td', null, v));
  return h('div', { class: 'notice', id: 'cert-parsed' },
    h('b', null, 'Parsed (dry run, nothing stored yet)'),
    h('table', { class: 'kvtable' }, h('tbody', null,
      row('Subject', info.subject),
      row('Names (SANs)', (info.sans || []).join(', ') || '—'),
      old ? row('Names before', (old.sans || []).join(', ') || '—') : null,
      row('Issuer', info.issuer),
      row('Valid from', when(info.not_before)),
      row('Expires', expiry(info.not_after)),
      row('Key', `${info.key_type} · chain of ${info.chain_length}`),
      row('SHA-256', h('code', null, info.fingerprint_sha256)))));
}
