// trnsim profile timeline: inflates the page's column blob, then draws every track with level of
// detail (slices narrower than 2 px that touch within a pixel merge into one bar; wider ones are
// drawn one by one) using binary search over each track's slices sorted by start, so a frame
// costs O(pixels x log slices) whatever the kernel's length.  Hash options, for reproducible
// views: #zoom=T0,T1 (ns) &expand=1 (DMA queues) &critical=1 &tip=CORE,INSTRUCTION.
(function () {
'use strict';
const M = JSON.parse(document.getElementById('meta').textContent);
const statusEl = document.getElementById('status');
const TYPES = {u8: Uint8Array, u16: Uint16Array, u32: Uint32Array, f32: Float32Array, f64: Float64Array};
const ROW_H = 18, LABEL_W = 160, AXIS_H = 22, MEM_H = 44, MIN_W = 2;
const MEM_COLORS = {sbuf: '#2a9d8f', psum: '#b5651d'};
let buf = null;

function col(name) { const c = M.cols[name]; return new TYPES[c[0]](buf, c[1], c[2]); }
function lowerBound(a, x, n) { let lo = 0, hi = n; while (lo < hi) { const m = (lo + hi) >> 1; if (a[m] < x) lo = m + 1; else hi = m; } return lo; }
function upperBound(a, x, n) { let lo = 0, hi = n; while (lo < hi) { const m = (lo + hi) >> 1; if (a[m] <= x) lo = m + 1; else hi = m; } return lo; }

async function inflate() {
  const text = document.getElementById('blob').textContent.trim();
  const bin = atob(text), u = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
  if (!M.z) return u.buffer;
  if (typeof DecompressionStream === 'undefined') throw new Error('this browser lacks DecompressionStream (use a current Chrome, Firefox or Safari)');
  const s = new Blob([u]).stream().pipeThrough(new DecompressionStream('deflate'));
  return await new Response(s).arrayBuffer();
}

// ---- the model: per core its engine tracks, the DMA track (placement groups), lazily its queues
function mkTrack(meta, cd, label, kind, color) {
  const d = col(meta.d), du = col(meta.du), ins = col(meta.ins), n = meta.n, tick = M.tick_ns;
  const s = new Float64Array(n), e = new Float64Array(n), r = new Float64Array(n);
  let acc = 0, reach = -Infinity;
  for (let i = 0; i < n; i++) { acc += d[i]; s[i] = acc * tick; e[i] = (acc + du[i]) * tick; if (e[i] > reach) reach = e[i]; r[i] = reach; }
  return {label, kind, color, cd, s, e, r, ins, n, meta, queue: -1};
}

function subTrack(parent, pos, label, queue) {
  const n = pos.length, s = new Float64Array(n), e = new Float64Array(n), r = new Float64Array(n), ins = new Uint32Array(n);
  let reach = -Infinity;
  for (let k = 0; k < n; k++) { const g = pos[k]; s[k] = parent.s[g]; e[k] = parent.e[g]; ins[k] = parent.ins[g]; if (e[k] > reach) reach = e[k]; r[k] = reach; }
  return {label, kind: 'queue', color: parent.color, cd: parent.cd, s, e, r, ins, n, queue};
}

function queueTracks(cd) {
  if (cd.queueRows) return cd.queueRows;
  const t = cd.dma, qn = col(t.meta.qn), qs = col(t.meta.qs);
  let Q = cd.queues; for (let k = 0; k < qs.length; k++) if (qs[k] + 1 > Q) Q = qs[k] + 1;
  const cnt = new Uint32Array(Q); for (let k = 0; k < qs.length; k++) cnt[qs[k]]++;
  const pos = []; for (let q = 0; q < Q; q++) pos.push(new Uint32Array(cnt[q]));
  const fill = new Uint32Array(Q); let off = 0;
  for (let g = 0; g < t.n; g++) { for (let k = 0; k < qn[g]; k++) { const q = qs[off + k]; pos[q][fill[q]++] = g; } off += qn[g]; }
  cd.queueRows = pos.map((p, q) => subTrack(t, p, 'DMA q' + q, q));
  return cd.queueRows;
}

// the labelled fixed-cost gaps (start-up, before the final store, ...) as a row of their own
function mkNotes(gaps, cd, label) {
  const n = gaps.length, s = new Float64Array(n), e = new Float64Array(n), r = new Float64Array(n);
  let reach = -Infinity;
  gaps.forEach((g, k) => { s[k] = g[1]; e[k] = g[1] + g[2]; if (e[k] > reach) reach = e[k]; r[k] = reach; });
  return {label, kind: 'note', color: '#9aa3ad', cd, s, e, r, n, ins: null, names: gaps.map(g => g[0]), queue: -1};
}

let cores = [];
function build() {
  const multi = M.cores.length > 1;
  cores = M.cores.map(c => {
    const cd = {core: c.core, n: c.n, queues: c.queues, meta: c, expanded: false, queueRows: null};
    const pre = multi ? 'NC' + c.core + ' ' : '';
    cd.engines = c.tracks.filter(t => t.kind === 'engine').map(t => mkTrack(t, cd, pre + t.label, 'engine', t.color));
    const dm = c.tracks.find(t => t.kind === 'dma');
    cd.dma = mkTrack(dm, cd, pre + dm.label, 'dma', dm.color);
    const qn = col(dm.qn); cd.qs = col(dm.qs); cd.qoff = new Uint32Array(cd.dma.n + 1);
    for (let g = 0; g < cd.dma.n; g++) cd.qoff[g + 1] = cd.qoff[g] + qn[g];
    cd.name = col(c.name); cd.src = col(c.src);
    cd.dmaIns = col(c.dma.ins); cd.dmaBytes = col(c.dma.bytes); cd.dmaContig = col(c.dma.contig); cd.dmaEff = col(c.dma.eff);
    cd.details = c.details; cd.detailIdx = c.detail_index ? col(c.detail_index) : null;
    cd.crit = c.critical ? col(c.critical) : new Uint32Array(0);
    // instruction -> (track, position): the slice a highlight or a #tip= view points at
    cd.insTrack = new Int8Array(c.n).fill(-1); cd.insPos = new Uint32Array(c.n);
    const all = cd.engines.concat([cd.dma]);
    all.forEach((t, k) => { for (let j = 0; j < t.n; j++) { const i = t.ins[j]; if (cd.insTrack[i] < 0) { cd.insTrack[i] = k; cd.insPos[i] = j; } } });
    cd.all = all;
    cd.notes = c.gaps && c.gaps.length ? mkNotes(c.gaps, cd, pre + 'Notes (fixed-cost gaps)') : null;
    return cd;
  });
}

let rows = [];
function layout() {
  rows = [];
  for (const cd of cores) {
    for (const t of cd.engines) rows.push(t);
    rows.push(cd.dma);
    if (cd.expanded) for (const q of queueTracks(cd)) rows.push(q);
    if (cd.notes) rows.push(cd.notes);
  }
}

// ---- view
const cv = document.getElementById('tl'), ctx = cv.getContext('2d');
const mv = document.getElementById('mem'), mctx = mv.getContext('2d');
const tip = document.getElementById('tip');
const T_MAX = Math.max(M.latency_ns, 1);
let t0 = 0, t1 = T_MAX, critOn = false;
function plotW() { return Math.max(10, cv.clientWidth - LABEL_W - 6); }
function X(t) { return LABEL_W + (t - t0) / (t1 - t0) * plotW(); }
function T(x) { return t0 + (x - LABEL_W) / plotW() * (t1 - t0); }

function niceStep(x) {
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}
function unitOf() { return T_MAX < 1e3 ? ['ns', 1] : T_MAX < 1e8 ? ['µs', 1e3] : ['ms', 1e6]; }
// tick labels never overlap: the step is the nicest one whose pixel width exceeds the widest label
function axisTicks(c) {
  const W = plotW(), nsPerPx = (t1 - t0) / W, [unit, scale] = unitOf();
  let minPx = 60, out = null;
  for (let iter = 0; iter < 6; iter++) {
    const step = niceStep(minPx * nsPerPx);
    const dec = Math.max(0, Math.ceil(-Math.log10(step / scale) - 1e-9));
    const ticks = [];
    for (let k = Math.ceil(t0 / step); k * step <= t1 + 1e-9 * step; k++) {
      const t = k * step, label = (t / scale).toFixed(dec) + ' ' + unit;
      ticks.push({t, label, x: X(t), w: c.measureText(label).width});
    }
    const widest = ticks.reduce((m, k) => Math.max(m, k.w), 0);
    out = {step, ticks};
    if (widest + 12 <= step / nsPerPx) break;
    minPx = widest + 12;
  }
  out.ticks = out.ticks.filter(k => k.x + 3 + k.w <= LABEL_W + W + 6);
  return out;
}

function drawTrack(tr, y, stats) {
  const W = plotW(), px = (t1 - t0) / W, n = tr.n, s = tr.s, e = tr.e, r = tr.r;
  const st = stats[tr.kind] || (stats[tr.kind] = {individual: 0, merged_bars: 0, merged_slices: 0});
  let i = lowerBound(r, t0, n);
  ctx.fillStyle = tr.color;
  while (i < n && s[i] <= t1) {
    if (e[i] - s[i] >= MIN_W * px) {      // wide enough to stand alone
      const x0 = X(s[i]), x1 = X(e[i]);
      ctx.fillRect(x0, y + 2, Math.max(1, x1 - x0 - 1), ROW_H - 4);
      if (x1 - x0 > 40) {
        const txt = tr.names ? tr.names[i] : M.names[tr.cd.name[tr.ins[i]]];
        ctx.fillStyle = '#fff'; ctx.fillText(txt, Math.max(x0, LABEL_W) + 3, y + 13, Math.max(1, x1 - Math.max(x0, LABEL_W) - 6));
        ctx.fillStyle = tr.color;
      }
      st.individual++; i++; continue;
    }
    let runEnd = e[i], j = i + 1;
    for (;;) {                            // absorb what starts within a pixel of the run
      const k = upperBound(s, runEnd + px, n);
      if (k <= j) break;
      if (k - j < 64) {                   // few: stop at the first wide slice, drawn alone
        let m = j; while (m < k && e[m] - s[m] < MIN_W * px) m++;
        if (m < k) { if (m > j) runEnd = Math.max(runEnd, r[m - 1]); j = m; break; }
      }
      runEnd = Math.max(runEnd, r[k - 1]); j = k;
    }
    const x0 = X(s[i]), x1 = Math.max(X(runEnd), x0 + 1);
    ctx.fillRect(x0, y + 2, x1 - x0, ROW_H - 4);
    if (j - i === 1) st.individual++; else { st.merged_bars++; st.merged_slices += j - i; }
    i = j;
  }
}

function rowOf(cd, i) {
  const k = cd.insTrack[i];
  if (k < 0) return null;
  const t = cd.all[k], y = rows.indexOf(t);
  return y < 0 ? null : {t, j: cd.insPos[i], y: AXIS_H + y * ROW_H};
}

function drawCritical() {
  const W = plotW();
  ctx.fillStyle = 'rgba(255,255,255,0.65)'; ctx.fillRect(LABEL_W, AXIS_H, W, rows.length * ROW_H);
  for (const cd of cores) {
    let prev = null; const many = cd.crit.length > 4000;
    for (let k = 0; k < cd.crit.length; k++) {
      const p = rowOf(cd, cd.crit[k]); if (!p) continue;
      const s = p.t.s[p.j], e = p.t.e[p.j];
      if (e >= t0 && s <= t1) {
        const x0 = X(s), x1 = Math.max(X(e), x0 + 1);
        ctx.fillStyle = p.t.color; ctx.fillRect(x0, p.y + 2, x1 - x0, ROW_H - 4);
        ctx.strokeStyle = '#000'; ctx.lineWidth = 1.5; ctx.strokeRect(x0, p.y + 1.5, x1 - x0, ROW_H - 3);
      }
      if (prev && !many && Math.max(prev.e, s) >= t0 && Math.min(prev.e, s) <= t1) {
        ctx.beginPath(); ctx.moveTo(X(prev.e), prev.y + ROW_H / 2); ctx.lineTo(X(s), p.y + ROW_H / 2); ctx.stroke();
      }
      prev = {e, y: p.y};
    }
  }
}

function memSeries() {
  const out = [];
  for (const [core, occ] of Object.entries(M.occupancy))
    for (const m of ['sbuf', 'psum']) if (occ[m]) out.push({core, m, o: occ[m]});
  return out;
}

function drawMem() {
  const ser = memSeries(), Wc = mv.clientWidth, W = plotW();
  mctx.clearRect(0, 0, Wc, mv.height); mctx.font = '11px sans-serif';
  ser.forEach((sr, k) => {
    const y = 4 + k * MEM_H, t = sr.o.t_ns, v = sr.o.bytes_per_partition, n = t.length;
    // scaled to the peak (the capacity is in the label): a small kernel's curve stays visible
    const cap = Math.max(sr.o.peak || 0, 1), capacity = sr.o.capacity_bytes_per_partition || 0;
    const colMax = new Float64Array(W + 1).fill(-1);
    let i = Math.max(0, upperBound(t, t0, n) - 1);
    for (; i < n && t[i] <= t1; i++) {
      const a = Math.max(t[i], t0), b = Math.min(i + 1 < n ? t[i + 1] : T_MAX, t1);
      if (b < a) continue;
      const xa = Math.max(0, Math.floor(X(a) - LABEL_W)), xb = Math.min(W, Math.floor(X(b) - LABEL_W));
      for (let x = xa; x <= xb; x++) if (v[i] > colMax[x]) colMax[x] = v[i];
    }
    mctx.fillStyle = k % 2 ? '#f6f7f9' : '#fff'; mctx.fillRect(0, y, Wc, MEM_H - 4);
    mctx.fillStyle = MEM_COLORS[sr.m];
    const hh = MEM_H - 10;
    for (let x = 0; x <= W; x++) if (colMax[x] > 0) { const h = Math.max(1, colMax[x] / cap * hh); mctx.fillRect(LABEL_W + x, y + 2 + hh - h, 1, h); }
    mctx.fillStyle = '#333';
    mctx.fillText((M.cores.length > 1 ? 'NC' + sr.core + ' ' : '') + sr.m.toUpperCase() + ' per partition', 4, y + 14);
    mctx.fillStyle = '#666';
    mctx.fillText('peak ' + (sr.o.peak / 1024).toFixed(1) + ' of ' + (capacity / 1024).toFixed(0) + ' KiB', 4, y + 28);
  });
}

function draw() {
  const W = cv.clientWidth, stats = {};
  ctx.clearRect(0, 0, W, cv.height); ctx.font = '11px sans-serif';
  const ax = axisTicks(ctx);
  for (let k = 0; k < rows.length; k++) {
    const y = AXIS_H + k * ROW_H;
    ctx.fillStyle = k % 2 ? '#f6f7f9' : '#fff'; ctx.fillRect(0, y, W, ROW_H);
  }
  ctx.fillStyle = '#e3e6e9';
  for (const tk of ax.ticks) ctx.fillRect(tk.x, AXIS_H, 1, rows.length * ROW_H);
  ctx.save(); ctx.beginPath(); ctx.rect(LABEL_W, 0, plotW(), cv.height); ctx.clip();
  rows.forEach((tr, k) => drawTrack(tr, AXIS_H + k * ROW_H, stats));
  if (critOn) drawCritical();
  ctx.restore();
  ctx.fillStyle = '#555';
  for (const tk of ax.ticks) { ctx.fillRect(tk.x, AXIS_H - 5, 1, 5); ctx.fillText(tk.label, tk.x + 3, 13); }
  rows.forEach((tr, k) => {
    const y = AXIS_H + k * ROW_H;
    ctx.fillStyle = k % 2 ? '#f6f7f9' : '#fff'; ctx.fillRect(0, y, LABEL_W - 2, ROW_H);
    ctx.fillStyle = '#333';
    const arrow = tr.kind === 'dma' ? (tr.cd.expanded ? '▾ ' : '▸ ') : tr.kind === 'queue' ? '    ' : '';
    ctx.fillText(arrow + tr.label, 4, y + 13, LABEL_W - 8);
  });
  drawMem();
  const axis = {t0, t1, step: ax.step, ticks: ax.ticks.map(k => ({t: k.t, label: k.label, x: +k.x.toFixed(2), w: +k.w.toFixed(2)}))};
  window.trnsim = Object.assign(window.trnsim || {}, {axis, view: {t0, t1, rows: rows.length, tracks: stats}});
  document.getElementById('axis-dump').textContent = JSON.stringify(axis);
  document.getElementById('view-dump').textContent = JSON.stringify(window.trnsim.view);
}

function resize() {
  const dpr = window.devicePixelRatio || 1, w = cv.parentElement.clientWidth;
  const h = AXIS_H + rows.length * ROW_H + 4, mh = memSeries().length * MEM_H + (memSeries().length ? 4 : 0);
  cv.width = w * dpr; cv.height = h * dpr; cv.style.height = h + 'px';
  mv.width = w * dpr; mv.height = Math.max(1, mh) * dpr; mv.style.height = mh + 'px';
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0); mctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  draw();
}

// ---- what a slice carries: the same fields as its Perfetto slice (name, ts, dur, args)
function fields(tr, j) {
  const cd = tr.cd, i = tr.ins[j];
  const args = {source: M.sources[cd.src[i]], instruction: i,
    detail: cd.details ? cd.details[cd.detailIdx[i]] : '(kept up to ' + M.detail_limit.toLocaleString() + ' instructions per core: see the Perfetto trace)'};
  if (tr.kind !== 'engine') {
    const k = lowerBound(cd.dmaIns, i, cd.dmaIns.length);
    let queue = tr.queue;
    if (tr.kind === 'dma') queue = Array.from(cd.qs.subarray(cd.qoff[j], cd.qoff[j + 1])).join(',');
    Object.assign(args, {bytes: cd.dmaBytes[k], contiguous_bytes_per_partition: cd.dmaContig[k],
      efficiency: Math.round(cd.dmaEff[k] * 1e4) / 1e4, queue});
  }
  return {name: M.names[cd.name[i]], track: tr.label, ts: +(tr.s[j] / 1e3).toFixed(6), dur: +((tr.e[j] - tr.s[j]) / 1e3).toFixed(6), args};
}

function hit(tr, t) {
  const tol = 3 * (t1 - t0) / plotW();
  let best = -1, bestD = Infinity;
  for (let m = upperBound(tr.s, t + tol, tr.n) - 1, c = 0; m >= 0 && c < 512 && tr.r[m] >= t - tol; m--, c++) {
    const d = t < tr.s[m] ? tr.s[m] - t : t > tr.e[m] ? t - tr.e[m] : 0;
    if (d < bestD) { bestD = d; best = m; if (d === 0) break; }
  }
  return bestD <= tol ? best : -1;
}

function showTip(f, x, y, merged) {
  const a = f.args, lines = [f.name + '  (' + f.track + ')', 'ts ' + f.ts.toFixed(3) + ' µs, dur ' + (f.dur * 1e3).toFixed(1) + ' ns'];
  for (const [k, v] of Object.entries(a)) lines.push(k + ': ' + (k === 'efficiency' ? (100 * v).toFixed(1) + ' %' : typeof v === 'number' ? v.toLocaleString() : v));
  if (merged) lines.push('(narrower than a pixel: zoom in to see each instruction)');
  tip.textContent = lines.join('\n');
  tip.style.left = Math.min(x + 12, cv.clientWidth - 320) + 'px'; tip.style.top = (y + 12) + 'px'; tip.style.display = 'block';
}

// ---- interaction
function clampView() {
  const span = Math.min(Math.max(t1 - t0, 1), T_MAX * 1.2);
  if (t0 < 0) t0 = 0;
  t1 = t0 + span;
  if (t1 > T_MAX * 1.1) { t1 = T_MAX * 1.1; t0 = Math.max(0, t1 - span); }
}
function zoomAt(x, z) { const tm = T(x); t0 = tm - (tm - t0) * z; t1 = tm + (t1 - tm) * z; clampView(); draw(); }
function wireEvents() {
  for (const c of [cv, mv]) c.addEventListener('wheel', ev => {
    ev.preventDefault(); const r = c.getBoundingClientRect();
    zoomAt(Math.min(Math.max(ev.clientX - r.left, LABEL_W), LABEL_W + plotW()), ev.deltaY < 0 ? 0.8 : 1.25);
  }, {passive: false});
  let drag = null;
  cv.addEventListener('mousedown', ev => { drag = {x: ev.clientX, t0, t1, moved: false}; });
  window.addEventListener('mouseup', ev => {
    if (drag && !drag.moved) {             // a click: the DMA row's label toggles its queues
      const r = cv.getBoundingClientRect(), k = Math.floor((ev.clientY - r.top - AXIS_H) / ROW_H);
      if (ev.clientX - r.left < LABEL_W && rows[k] && rows[k].kind === 'dma') { rows[k].cd.expanded = !rows[k].cd.expanded; layout(); resize(); }
    }
    drag = null;
  });
  cv.addEventListener('mousemove', ev => {
    const r = cv.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    if (drag) {
      if (Math.abs(ev.clientX - drag.x) > 2) drag.moved = true;
      const dt = (ev.clientX - drag.x) / plotW() * (drag.t1 - drag.t0);
      t0 = drag.t0 - dt; t1 = drag.t1 - dt; clampView(); draw(); return;
    }
    const k = Math.floor((y - AXIS_H) / ROW_H), tr = rows[k];
    if (!tr || x < LABEL_W) { tip.style.display = 'none'; return; }
    const j = hit(tr, T(x));
    if (j < 0) { tip.style.display = 'none'; return; }
    if (tr.kind === 'note') {
      showTip({name: tr.names[j], track: tr.label, ts: tr.s[j] / 1e3, dur: (tr.e[j] - tr.s[j]) / 1e3,
        args: {note: 'fixed cost: no engine or queue moves this kernel\'s data'}}, x, y, false);
      return;
    }
    showTip(fields(tr, j), x, y, tr.e[j] - tr.s[j] < (t1 - t0) / plotW());
  });
  cv.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
  cv.addEventListener('dblclick', () => { t0 = 0; t1 = T_MAX; draw(); });
  document.getElementById('reset').addEventListener('click', () => { t0 = 0; t1 = T_MAX; draw(); });
  const ct = document.getElementById('crit-toggle');
  ct.checked = critOn; ct.addEventListener('change', () => { critOn = ct.checked; draw(); });
  window.addEventListener('resize', resize);
}

function applyHash() {
  const h = new URLSearchParams(location.hash.replace(/^#/, ''));
  if (h.get('zoom')) { const [a, b] = h.get('zoom').split(',').map(Number); if (b > a) { t0 = a; t1 = b; } }
  if (h.get('expand') === '1') for (const cd of cores) cd.expanded = true;
  if (h.get('critical') === '1') critOn = true;
  return h.get('tip');
}

function tipFor(spec) {
  const [c, i] = spec.split(',').map(Number), cd = cores.find(x => x.core === c) || cores[0];
  const k = cd.insTrack[i]; if (k < 0) return null;
  let tr = cd.all[k], j = cd.insPos[i];
  if (tr.kind === 'dma' && cd.expanded) {       // its first queue's slice, as Perfetto's flow binds to
    const q = cd.qs[cd.qoff[j]];
    tr = queueTracks(cd)[q]; j = Array.prototype.indexOf.call(tr.ins, i);
  }
  const f = fields(tr, j);
  document.getElementById('tip-dump').textContent = JSON.stringify(f);
  const y = AXIS_H + rows.indexOf(tr) * ROW_H;
  showTip(f, Math.max(LABEL_W, X((tr.s[j] + tr.e[j]) / 2)), y, false);
  return f;
}

inflate().then(b => {
  buf = b; build(); const tipSpec = applyHash(); layout(); wireEvents(); resize();
  if (tipSpec) tipFor(tipSpec);
  const n = cores.reduce((a, c) => a + c.n, 0);
  window.trnsim.load_ms = Math.round(performance.now());
  statusEl.textContent = n.toLocaleString() + ' instructions; timeline ready ' + window.trnsim.load_ms + ' ms after the page began loading.';
}).catch(err => { statusEl.textContent = 'timeline failed: ' + err.message; });
})();
