"""Record a generation's fitted serving constants in the data files, with the rows they come from:
efficiency factors in ``calibration.toml [serving.<gen>]`` (what inference estimates of the generation use), the Neuron fixed
costs in ``neuron_serving.toml [runtime.<gen>]``."""
from __future__ import annotations

import os
import re
import statistics
from typing import List, Mapping

from .datafiles import DATA_DIR, reload
from .serving_calibrate import EFF_KEYS, RUNTIME_KEYS

KIND_OF = {"ttft_ms": "ttft", "serving.ttft_ms_p50": "ttft"}


def _replace_section(text: str, header: str, body: str) -> str:
    """``text`` with the TOML table ``header`` (up to the next table) replaced by ``body``, or appended."""
    pat = re.compile(r"^\[" + re.escape(header) + r"\]\n(?:(?!^\[).*\n?)*", re.M)
    block = f"[{header}]\n{body}\n\n"
    if pat.search(text):
        return pat.sub(lambda m: block, text, count=1)
    return text.rstrip("\n") + "\n\n" + block


def write(gen: str, constants: Mapping[str, float], results: List) -> str:
    """Write ``gen``'s constants; the band of each kind is the median |error| of its rows (at least 10%)."""
    fitted = [r for r in results if not r.holdout]
    ids = sorted(r.id for r in fitted)
    held = sorted(r.id for r in results if r.holdout)
    kinds = {"ttft": [], "tpot": [], "train": []}
    for r in results:
        kinds[KIND_OF.get(r.metric, "tpot")].append(abs(r.error))
    bands = {k: max(0.10, statistics.median(v)) if v else 0.5 for k, v in kinds.items()}
    lines = [f"{k} = {constants[k]:.4g}" for k in EFF_KEYS]
    lines += [f"band_{k} = {bands[k]:.3g}" for k in ("train", "ttft", "tpot")]
    lines.append("rows = [" + ", ".join(f'"{i}"' for i in ids) + "]")
    lines.append("held_out = [" + ", ".join(f'"{i}"' for i in held) + "]")
    lines.append('fitted_on = "serving rows of serving_rows.csv (bench/serving.py --refit --write); no training '
                 'rows: band_train is the serving band until training rows of this generation are fitted"')
    path = os.path.join(DATA_DIR, "calibration.toml")
    text = open(path, encoding="utf-8").read()
    text = _replace_section(text, f"serving.{gen}", "\n".join(lines))
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    src = f"fitted on rows {', '.join(ids)} (held out: {', '.join(held) or 'none'})"
    body = "\n".join(f'{k} = {{ value = {constants[k]:.4g}, source = "{src}" }}' for k in RUNTIME_KEYS)
    path2 = os.path.join(DATA_DIR, "neuron_serving.toml")
    text = open(path2, encoding="utf-8").read()
    text = _replace_section(text, f"runtime.{gen}", body)
    with open(path2, "w", encoding="utf-8") as f:
        f.write(text)
    reload()
    return f"{path} [serving.{gen}], {path2} [runtime.{gen}]"
