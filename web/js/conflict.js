// Edits against concurrent changes. An edit form is built from the object
// as GET returns it, with its ETag; the write sends that ETag as If-Match,
// so a change made meanwhile by someone else (an operator draining a
// server, another tab) is never silently undone by re-sending the old
// copy. On 412 the form shows what changed since it was loaded and offers
// to reload (drop these edits, start from the current object) or to
// overwrite (send these edits over the current object, itself guarded by
// the ETag just shown).

import { h, clear, confirmBox, toast } from './dom.js';
import { request, ApiError } from './api.js';
import { write, act } from './common.js';
import { jsonDiff, show } from './diff.js';

// loadForEdit reads one object for an edit form: {data, etag, base}; base
// is the copy the form was built from (data is edited in place).
export async function loadForEdit(path) {
  const r = await request('GET', path);
  return { data: r.data, etag: r.headers.get('ETag'), base: structuredClone(r.data) };
}

// guardedWrite sends an edit form's write with If-Match: ed.etag. It
// resolves true when written, false when the object changed meanwhile: the
// form then shows what changed, with Reload (calls reload()) and Overwrite
// (submits the form again against the current version). Other errors
// propagate (the form maps them to its fields).
export async function guardedWrite(ctx, form, ed, method, path, body, what, reload) {
  try {
    await write(ctx, method, path, body, what, { ifMatch: ed.etag });
    return true;
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 412) throw e;
  }
  const cur = await request('GET', path);
  const changes = jsonDiff(ed.base, cur.data);
  let box = form.querySelector('.conflict');
  if (!box) {
    box = h('div', { class: 'notice warn conflict', role: 'alert', tabindex: '-1', 'data-conflict': '' });
    form.querySelector('.plan-preview').before(box);
  }
  clear(box).append(
    h('b', null, 'Changed by someone else since this form was loaded'), ' (HTTP 412: nothing was saved).',
    changes.length ? h('div', { class: 'tablewrap' }, h('table', { class: 'diff' },
      h('thead', null, h('tr', null, h('th', null, 'Where'), h('th', null, 'When loaded'), h('th', null, 'Now'))),
      h('tbody', null, changes.map((x) => h('tr', { class: x.op },
        h('td', { class: 'path' }, x.path.replace(/^\./, '')),
        h('td', { class: 'old' }, show(x.old)),
        h('td', { class: 'new' }, show(x.new)))))))
      : h('p', null, 'The current version reads the same (changed and changed back).'),
    h('div', { class: 'actions left' },
      h('button', { type: 'button', class: 'btn', 'data-action': 'reload', onclick: () => reload() }, 'Reload (drop my edits)'),
      h('button', {
        type: 'button', class: 'btn danger', 'data-action': 'overwrite',
        onclick: () => {
          // Overwrite what was just shown, and nothing newer.
          ed.etag = cur.headers.get('ETag');
          ed.base = structuredClone(cur.data);
          box.remove();
          form.requestSubmit();
        },
      }, 'Overwrite with my version')));
  box.focus();
  return false;
}

// confirmDelete asks before deleting the object at path, as GET returns it
// when the question is shown, and deletes with its ETag as If-Match: a
// change made while the question was open (a server drained, a bind
// moved) stops the delete, with a message. Resolves true when something
// changed (deleted, or refused for a change: the page should refresh).
export async function confirmDelete(ctx, button, path, title, body, what) {
  let ed = null;
  if (!await act(ctx, null, async () => { ed = await loadForEdit(path); })) return false;
  if (!await confirmBox(title, body, { ok: what.verb, danger: true })) return false;
  return act(ctx, button, async () => {
    try {
      await write(ctx, 'DELETE', path, undefined, what.done, { ifMatch: ed.etag });
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 412) throw e;
      toast(`${what.object} changed since the question was shown: nothing was removed. The page now shows it as it is.`, 'bad');
    }
  });
}
