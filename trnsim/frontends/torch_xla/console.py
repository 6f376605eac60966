"""Terminal output of a recording session: one line per step and the end-of-run rich table (stderr, so the
script's own stdout stays as it was)."""
from __future__ import annotations

from typing import Dict, TextIO

PREFIX = "[trnsim]"
_SHORT = {"forward": "fwd", "backward": "bwd", "optimizer": "opt"}


def fmt_s(s: float) -> str:
    """Seconds as a short human figure (us / ms / s)."""
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1.0:
        return f"{s * 1e3:.3f} ms"
    return f"{s:.3f} s"


def step_line(r, info, new: bool) -> str:
    """``[trnsim] step 3  trn1.32xlarge est 1.234 ms (fwd .. bwd .. opt .. comm ..)  cpu 45 ms  graph 2 ...``."""
    est = info.est
    parts = [f"{_SHORT.get(k, k)} {fmt_s(v)}" for k, v in est.by_phase.items() if v > 0]
    if est.comm_s:
        parts.append(f"all-reduce {fmt_s(est.comm_exposed_s)} exposed of {fmt_s(est.comm_s)}")
    state = info.status if new else "reused"
    line = (f"{PREFIX} step {r.step:>3}  est {fmt_s(r.est_s)} on {est.instance} ({', '.join(parts)})  "
            f"cpu {fmt_s(r.cpu_s)}  graph {info.id} ({state})")
    if new and info.reason:
        line += f"\n{PREFIX}   new graph: {info.reason}"
    return line


def projection_column(s: Dict, proj: Dict):
    """Column heads (this run, whole instance) and the projection's cells keyed by the summary's row names
    (steady step, breakdown, tokens/s, MFU); no cells when there is no projection."""
    here = f"this run: {s['world']} rank{'s' if s['world'] > 1 else ''}"
    if not proj:
        return (here,), {}
    head = (here, f"whole {s['instance']}: {proj['ranks']} ranks, data parallel (projected)")
    if proj.get("step_s") is None:
        return head, {f"steady step (graph {s['steady_graph']})": proj.get("note", "n/a")}
    tps = proj["tokens_per_s"]
    brk = f"compute {fmt_s(proj['compute_s'])}, comm_exposed {fmt_s(proj['comm_exposed_s'])}"
    if proj.get("grad_bytes"):
        brk += f" (all-reduce of {proj['grad_bytes'] / 1e6:,.2f} MB of gradients)"
    return head, {f"steady step (graph {s['steady_graph']})": fmt_s(proj["step_s"]), "  breakdown": brk,
                  "tokens / s (all ranks)": f"{tps:,.0f}" if tps else "n/a",
                  "MFU (BF16 dense peak)": f"{100 * proj['mfu']:.1f} %"}


def print_summary(s: Dict, stream: TextIO) -> None:
    """The summary as a rich table (plus the recompilation and unlowered-op lists)."""
    from rich.console import Console
    from rich.table import Table
    con = Console(file=stream, highlight=False, width=120)
    if not s.get("steps"):
        con.print(f"{PREFIX} {s.get('note', 'no steps recorded')}", markup=False)
        return
    t = Table(title=f"trnsim: estimated Trainium training step on {s['instance']} "
              f"({s['world']} rank{'s' if s['world'] > 1 else ''}, LNC={s['lnc']})", title_justify="left")
    proj = s.get("instance_projection") or {}
    head, pcol = projection_column(s, proj)
    t.add_column("figure")
    t.add_column(head[0])
    if pcol:
        t.add_column(head[1])
    tps = s["tokens_per_s"]
    rows = [("steps (graphs executed)", s["steps"]),
            ("mean estimated step", fmt_s(s["mean_step_s"])),
            (f"steady step (graph {s['steady_graph']})", fmt_s(s["steady_step_s"])),
            ("  breakdown", ", ".join(f"{k} {fmt_s(v)}" for k, v in s["breakdown_s"].items() if v > 0)),
            ("tokens / s (all ranks)", f"{tps:,.0f}" if tps else "n/a (no token embedding seen)"),
            ("MFU (BF16 dense peak)", f"{100 * s['mfu']:.1f} %"),
            ("CPU wall per step (mean)", fmt_s(s["cpu_mean_s"])),
            ("distinct graphs (compilations)", f"{s['graphs_distinct']}  ({s['compiled']} compiled, "
                                               f"{s['cache_hits']} cache hits)"),
            ("compile cache", s["cache_dir"])]
    for k, v in rows:
        t.add_row(k, str(v), *([pcol.get(k, "")] if pcol else []))
    con.print(t)
    if proj:
        con.print(f"{PREFIX} whole-instance projection assumes: {proj['assumes']}"
                  + (f" ({proj['note']})" if proj.get("note") else ""), markup=False)
    if s["recompiles_every_step"]:
        con.print(f"{PREFIX} RECOMPILES EVERY STEP: each step built a graph of a new shape "
                  "(on Trainium each one is a Neuron compilation)", markup=False)
    for r in s["recompilations"][:5]:
        con.print(f"{PREFIX}   graph {r['graph']} (step {r['step']}): {r['reason']}", markup=False)
    if len(s["recompilations"]) > 5:
        con.print(f"{PREFIX}   ... {len(s['recompilations']) - 5} more")
    un = s["unlowered_ops"]
    if un:
        con.print(f"{PREFIX} ops with no Trainium lowering (not costed): " +
                  ", ".join(f"{k} at {v['where']}" for k, v in un.items()), markup=False)
