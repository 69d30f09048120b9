// Live rate charts drawn with uPlot (vendored from the npm registry, MIT).

import uPlot from '../vendor/uplot/uPlot.esm.js';
import { bytes, rate } from './dom.js';

const PALETTE = ['#2f6fed', '#e8590c', '#2b8a3e', '#ae3ec9', '#d6336c', '#0c8599', '#f59f00', '#5c7cfa'];

function css(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888'; }

// timeLabels draws the time axis labels (uPlot axis "values"): HH:MM:SS
// (HH:MM when ticks are whole minutes apart), and on a narrow chart only
// every n-th label, n chosen from the measured label width against the
// space between ticks, so that labels never overlap.
export function timeLabels(u, splits, axisIdx, space, incr) {
  const two = (n) => String(n).padStart(2, '0');
  const secs = !(incr >= 60 && splits.every((t) => t % 60 === 0));
  const labels = splits.map((t) => {
    const d = new Date(t * 1000);
    return `${two(d.getHours())}:${two(d.getMinutes())}${secs ? ':' + two(d.getSeconds()) : ''}`;
  });
  if (splits.length < 2) return labels;
  const px = (v) => u.valToPos(v, 'x'); // CSS pixels
  const gap = Math.abs(px(splits[1]) - px(splits[0]));
  let width = 0;
  const c = u.ctx;
  if (c) {
    c.save();
    c.font = u.axes[axisIdx].font ? u.axes[axisIdx].font[0] : '12px system-ui';
    width = Math.max(...labels.map((l) => c.measureText(l).width)) / (window.devicePixelRatio || 1);
    c.restore();
  }
  if (!(width > 0)) width = labels[0].length * 7.5;
  const every = gap > 0 ? Math.max(1, Math.ceil((width + 12) / gap)) : 1;
  return labels.map((l, i) => (i % every === 0 ? l : ''));
}

// RateChart plots one rate per frontend (field "req" or "bytes") from the
// sample history of live.js.
export class RateChart {
  constructor(el, { field, label, isBytes }) {
    this.el = el;
    this.field = field;
    this.label = label;
    this.isBytes = isBytes;
    this.plot = null;
    this.names = '';
    this.ro = new ResizeObserver(() => this._resize());
    this.ro.observe(el);
  }

  _size() {
    const w = Math.max(260, Math.floor(this.el.clientWidth || 600));
    return { width: w, height: w < 500 ? 170 : 210 };
  }

  _resize() {
    if (this.plot) {
      const s = this._size();
      if (s.width !== this.plot.width || s.height !== this.plot.height) this.plot.setSize(s);
    }
  }

  update(history) {
    const names = [];
    for (const smp of history) for (const k of smp.rates.keys()) if (!names.includes(k)) names.push(k);
    names.sort();
    const xs = history.map((s) => s.t);
    const ys = names.map((n) => history.map((s) => {
      const r = s.rates.get(n);
      return r && r[this.field] !== null && r[this.field] !== undefined ? r[this.field] : null;
    }));
    const data = [xs, ...ys];
    const key = names.join('\u0000');
    if (!this.plot || key !== this.names) {
      if (this.plot) this.plot.destroy();
      this.names = key;
      const fmt = (v) => (v === null || v === undefined ? '—' : this.isBytes ? bytes(v) + '/s' : rate(v));
      const axis = { stroke: css('--muted'), grid: { stroke: css('--line'), width: 1 }, ticks: { stroke: css('--line'), width: 1 } };
      this.plot = new uPlot({
        ...this._size(),
        legend: { live: true },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true, range: (u, min, max) => [Math.min(min, max - 60), max] }, y: { range: (u, min, max) => [0, Math.max(max * 1.15, this.isBytes ? 1024 : 1)] } },
        axes: [
          { ...axis, values: timeLabels },
          { ...axis, size: this.isBytes ? 78 : 56, values: (u, vals) => vals.map((v) => (this.isBytes ? bytes(v) : String(+v.toFixed(2)))) },
        ],
        series: [
          { label: 'time' },
          ...names.map((n, i) => ({
            label: n, stroke: PALETTE[i % PALETTE.length], width: 2, spanGaps: false, points: { show: false },
            fill: names.length === 1 ? PALETTE[i % PALETTE.length] + '18' : undefined, value: (u, v) => fmt(v),
          })),
        ],
      }, data, this.el);
      this.plot.root.setAttribute('aria-label', this.label);
    } else {
      this.plot.setData(data);
    }
    // Without a pointer over the chart the legend shows the latest values.
    if (xs.length && !(this.plot.cursor.left >= 0)) this.plot.setLegend({ idx: xs.length - 1 });
  }

  destroy() {
    this.ro.disconnect();
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}
