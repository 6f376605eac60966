"""What the legacy ``nki.profile`` decorator writes: trnsim's own profile artifacts (a Perfetto
trace, an HTML report and a JSON summary) in the working directory.  NEFF/NTFF files are products
of the Neuron compiler and runtime and are not produced."""
from __future__ import annotations

import os

from ..outputs import atomic_output, dumps_strict
from ..timing import estimate_run
from .html import write_html
from .perfetto import write_perfetto
from .summary import summarize


def write_profile_artifacts(run, working_directory: str, opts: dict) -> dict:
    """Time a harness run and write its Perfetto JSON and HTML report into
    ``working_directory`` (the legacy ``profile`` decorator's outputs); returns their paths."""
    os.makedirs(working_directory, exist_ok=True)
    est = estimate_run(run)
    base = os.path.splitext(os.path.basename(opts.get("save_trace_name") or "profile.ntff"))[0]
    paths = {
        "perfetto": os.path.join(working_directory, f"{base}.perfetto.json"),
        "html": os.path.join(working_directory, f"{base}.html"),
        "summary": os.path.join(working_directory, "json_reports", f"{base}.summary.json"),
    }
    write_perfetto(est, paths["perfetto"])
    write_html(est, paths["html"])
    os.makedirs(os.path.dirname(paths["summary"]), exist_ok=True)
    with atomic_output(paths["summary"]) as f:
        f.write(dumps_strict(summarize(est).to_dict(), default=str, indent=2))
    return paths
