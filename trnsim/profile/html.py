"""A self-contained HTML report (no network): the summary, engine busy bars and a zoomable
timeline drawn on a canvas from data embedded in the page."""
from __future__ import annotations

import html
import json
from typing import Dict, List

import numpy as np

from ..ir.engines import ENGINE_CODE
from ..timing.estimate import Estimate
from .events import TRACK_NAME, TRACK_ORDER, _src, events, tracks

MAX_EVENTS = 300_000  # beyond this, adjacent slices on a track are merged for drawing

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>trnsim profile: __TITLE__</title>
<style>
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:16px;color:#1d232a;background:#fff}
h1{font-size:20px;margin:0 0 4px} .verdict{font-size:15px;margin:4px 0 12px;color:#333}
table{border-collapse:collapse;font-size:13px;margin-bottom:12px} td,th{padding:2px 10px;text-align:left}
tr:nth-child(even){background:#f3f5f7} .bar{height:10px;background:#4a7fd6;display:inline-block}
#wrap{position:relative;border:1px solid #c8ccd0} canvas{display:block;width:100%}
#tip{position:absolute;pointer-events:none;background:#222;color:#fff;font-size:12px;padding:4px 6px;
border-radius:3px;display:none;max-width:640px;white-space:pre-wrap}
.small{color:#666;font-size:12px}
</style></head><body>
<h1>__TITLE__</h1>
<div class="verdict" id="verdict"></div>
<div style="display:flex;gap:32px;flex-wrap:wrap">
<table id="summary"></table><table id="engines"></table></div>
<p class="small">Timeline: scroll to zoom, drag to pan, hover a slice for its instruction and source line.
Times in microseconds from kernel start.</p>
<div id="wrap"><canvas id="tl"></canvas><div id="tip"></div></div>
<script id="data" type="application/json">__DATA__</script>
<script>
(function(){
const D = JSON.parse(document.getElementById('data').textContent);
const S = D.summary;
document.getElementById('verdict').textContent = S.bottleneck;
const sum = document.getElementById('summary');
const rows = [['target',S.target],['latency',S.latency_us.toFixed(3)+' us'],['instructions',S.instructions],
 ['HFU',(100*S.hfu).toFixed(2)+' %'],['HBM bytes',S.hbm_bytes.toLocaleString()],
 ['HBM bandwidth',S.hbm_gbps.toFixed(1)+' GB/s'],['PE throttled',S.pe_throttled_us+' us'],
 ['trnsim wall time',S.sim_seconds+' s']];
sum.innerHTML = '<tr><th colspan=2>summary</th></tr>' + rows.map(r=>'<tr><td>'+r[0]+'</td><td>'+r[1]+'</td></tr>').join('');
const eng = document.getElementById('engines');
let eh = '<tr><th>engine</th><th>busy</th><th></th></tr>';
for (const [k,v] of Object.entries(S.engines)) { if (k.startsWith('DMA:q')) continue;
  eh += '<tr><td>'+k+'</td><td>'+(100*v).toFixed(1)+' %</td><td><span class="bar" style="width:'+Math.round(200*v)+'px"></span></td></tr>'; }
eng.innerHTML = eh;
const tracks = D.tracks, ev = D.events, names = D.names, srcs = D.sources;
const cv = document.getElementById('tl'), ctx = cv.getContext('2d');
const rowH = 18, labelW = 110, top = 20;
let t0 = 0, t1 = Math.max(D.latency_ns, 1);
const colors = {PE:'#4a7fd6',DVE:'#e08a2e',ACT:'#3aa657',POOL:'#9d5bd2',SP:'#888',DMA:'#d65a5a'};
function color(tr){ const k = tr.split(':')[1]; return colors[k] || '#777'; }
function resize(){ const w = cv.parentElement.clientWidth; cv.width = w*devicePixelRatio;
  cv.height = (top + tracks.length*rowH + 4)*devicePixelRatio; cv.style.height = (top + tracks.length*rowH + 4)+'px';
  ctx.setTransform(devicePixelRatio,0,0,devicePixelRatio,0,0); draw(); }
function X(t){ return labelW + (t - t0)/(t1 - t0)*(cv.clientWidth - labelW - 4); }
function draw(){ const W = cv.clientWidth;
  ctx.clearRect(0,0,W,cv.height); ctx.font = '11px sans-serif';
  for (let i=0;i<tracks.length;i++){ const y = top + i*rowH;
    ctx.fillStyle = i%2 ? '#f6f7f9' : '#fff'; ctx.fillRect(0,y,W,rowH);
    ctx.fillStyle = '#333'; ctx.fillText(tracks[i], 4, y+13); }
  ctx.fillStyle = '#555'; const span = t1 - t0; const step = Math.pow(10, Math.floor(Math.log10(span/5)));
  for (let t = Math.ceil(t0/step)*step; t < t1; t += step){ const x = X(t);
    ctx.fillRect(x, top-4, 1, 4); ctx.fillText((t/1000).toFixed(step<1000?3:1)+' us', x+2, 12); }
  for (let j=0;j<ev.length;j+=5){ const s = ev[j+1], d = ev[j+2];
    if (s + d < t0 || s > t1) continue; const tr = ev[j];
    const x0 = X(s), x1 = Math.max(X(s+d), x0+1); const y = top + tr*rowH + 2;
    ctx.fillStyle = color(tracks[tr]); ctx.fillRect(x0, y, x1-x0, rowH-4); } }
cv.addEventListener('wheel', e=>{ e.preventDefault(); const r = cv.getBoundingClientRect();
  const fx = Math.min(Math.max((e.clientX - r.left - labelW)/(cv.clientWidth - labelW), 0), 1);
  const tm = t0 + fx*(t1 - t0); const z = e.deltaY < 0 ? 0.8 : 1.25;
  t0 = tm - (tm - t0)*z; t1 = tm + (t1 - tm)*z; if (t0 < 0) t0 = 0; draw(); }, {passive:false});
let drag = null;
cv.addEventListener('mousedown', e=>{ drag = {x:e.clientX, t0:t0, t1:t1}; });
window.addEventListener('mouseup', ()=>{ drag = null; });
const tip = document.getElementById('tip');
cv.addEventListener('mousemove', e=>{ const r = cv.getBoundingClientRect();
  if (drag){ const dt = (e.clientX - drag.x)/(cv.clientWidth - labelW)*(drag.t1 - drag.t0);
    t0 = Math.max(0, drag.t0 - dt); t1 = t0 + (drag.t1 - drag.t0); draw(); return; }
  const tr = Math.floor((e.clientY - r.top - top)/rowH); const t = t0 + (e.clientX - r.left - labelW)/(cv.clientWidth - labelW)*(t1 - t0);
  let hit = -1; for (let j=0;j<ev.length;j+=5){ if (ev[j]===tr && ev[j+1]<=t && t<=ev[j+1]+ev[j+2]){ hit=j; break; } }
  if (hit<0){ tip.style.display='none'; return; }
  tip.textContent = names[ev[hit+3]] + '  (' + tracks[tr] + ')\\n' + (ev[hit+1]/1000).toFixed(3) + ' us, ' + ev[hit+2].toFixed(1) + ' ns\\n' + srcs[ev[hit+4]];
  tip.style.left = (e.clientX - r.left + 12)+'px'; tip.style.top = (e.clientY - r.top + 12)+'px'; tip.style.display='block'; });
cv.addEventListener('mouseleave', ()=>{ tip.style.display='none'; });
window.addEventListener('resize', resize); resize();
})();
</script></body></html>
"""


def report_data(est: Estimate) -> Dict:
    """The compact JSON the HTML report embeds: summary, tracks and slices as columns."""
    names: Dict[str, int] = {}
    srcs: Dict[str, int] = {}
    tr = tracks(est)
    tidx = {t: i for i, t in enumerate(tr)}
    flat: List[float] = []
    total = sum(len(c.trace) - int(np.count_nonzero(c.timeline.engine_code == _DMA))
                + len(c.timeline.dma_parts) for c in est.cores)
    if total > MAX_EVENTS:  # merge neighbours on a track so the page stays small
        eps = max(est.latency_ns, 1.0) / MAX_EVENTS * len(tr)
        for track, s, end, count, ins in _merged_bars(est, eps):
            name = ins.opcode if count == 1 else f"{count} instructions"
            flat += [tidx[track], round(s, 1), round(end - s, 1),
                     names.setdefault(name, len(names)), srcs.setdefault(_src(ins), len(srcs))]
    else:
        for e in sorted(events(est, details=False), key=lambda e: (tidx[e.track], e.start_ns)):
            flat += [tidx[e.track], round(e.start_ns, 1), round(e.dur_ns, 1),
                     names.setdefault(e.name, len(names)), srcs.setdefault(e.source, len(srcs))]
    return {"summary": est.summary(), "tracks": tr, "events": flat, "names": list(names),
            "sources": list(srcs), "latency_ns": est.latency_ns}


_DMA = ENGINE_CODE["dma"]


def _merged_bars(est: Estimate, eps: float):
    """Per track, runs of slices separated by gaps of at most ``eps`` ns merged into one bar:
    (track, start, end, slices, first instruction), computed on the timeline's arrays."""
    for c in est.cores:
        tl = c.timeline
        instrs = c.trace.instructions
        nc = f"NC{c.core}"
        per_track = []
        for eng in TRACK_ORDER:
            idx = np.flatnonzero(tl.engine_code == ENGINE_CODE[eng])
            per_track.append((f"{nc}:{TRACK_NAME[eng]}", tl.start[idx], tl.busy_end[idx], idx))
        dp = tl.dma_parts
        if len(dp.ins):
            g = np.repeat(np.arange(len(dp.ins)), np.diff(dp.off))
            queue = np.asarray(dp.queue)
            for q in np.unique(queue):
                sel = g[queue == q]
                per_track.append((f"{nc}:DMA:q{int(q)}", dp.start[sel], dp.end[sel], dp.ins[sel]))
        for track, s, e, ins in per_track:
            if not len(s):
                continue
            order = np.argsort(s, kind="stable")
            s, e, ins = s[order], e[order], ins[order]
            reach = np.maximum.accumulate(e)
            new = np.ones(len(s), dtype=bool)
            new[1:] = s[1:] - reach[:-1] > eps
            first = np.flatnonzero(new)
            ends = np.maximum.reduceat(e, first)
            counts = np.diff(np.append(first, len(s)))
            for k, f in enumerate(first.tolist()):
                yield track, float(s[f]), float(ends[k]), int(counts[k]), instrs[int(ins[f])]


def render_html(est: Estimate, title: str = "") -> str:
    """A self-contained HTML report (no network access needed to view it)."""
    data = json.dumps(report_data(est), separators=(",", ":")).replace("</", "<\\/")
    t = html.escape(title or f"{est.kernel} on {est.target}")
    return _PAGE.replace("__TITLE__", t).replace("__DATA__", data)


def write_html(est: Estimate, path: str, title: str = "") -> None:
    """Write ``render_html`` to ``path``."""
    with open(path, "w") as f:
        f.write(render_html(est, title))
