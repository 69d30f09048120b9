// Server-sent events read with fetch and a ReadableStream (EventSource
// cannot send the Authorization header): /api/v1/events (live.js) and
// /api/v1/logs?follow=1 (pages/logs.js).

// parseEvent reads one event block ("event:" and "data:" lines; comments,
// such as the heartbeat, start with ":"): {type, data} with data parsed
// as JSON, or null for a block without data or with data that is not JSON.
export function parseEvent(block) {
  let type = 'message'; const data = [];
  for (const line of block.split(/\r?\n/)) {
    if (!line || line.startsWith(':')) continue;
    const c = line.indexOf(':');
    const field = c < 0 ? line : line.slice(0, c);
    let v = c < 0 ? '' : line.slice(c + 1);
    if (v.startsWith(' ')) v = v.slice(1);
    if (field === 'event') type = v;
    else if (field === 'data') data.push(v);
  }
  if (!data.length) return null;
  try { return { type, data: JSON.parse(data.join('\n')) }; } catch { return null; }
}

// readEvents reads a text/event-stream body until it ends, calling
// onEvent(type, data) for each event. It resolves when the server ends
// the stream and rejects when the fetch is aborted or the connection drops.
export async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let m;
    while ((m = /\r?\n\r?\n/.exec(buf))) {
      const ev = parseEvent(buf.slice(0, m.index));
      buf = buf.slice(m.index + m[0].length);
      if (ev) onEvent(ev.type, ev.data);
    }
  }
}
