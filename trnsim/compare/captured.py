"""Step 2 of the evaluation for a user's own model: its captured op graph (``to_ops``) timed per accelerator
(``model.captured.estimate_ops`` on any system: NeuronCores or GPUs),
then scaled out data-parallel to meet the deadline. Collectives are not in a captured graph: the gradient
all-reduce is not costed (stated in every row's notes)."""
from __future__ import annotations

import math
from typing import Callable, Sequence

from ..model.ops import Op
from .search import Choice, NoFitError
from .systems import SystemRef
from .workload import Workload

NOTE = "captured graph, data parallel over every accelerator; gradient all-reduce not costed (not in the capture)"


def captured_chooser(ops: Sequence[Op], tokens_per_example: int) -> Callable[[SystemRef, Workload], Choice]:
    """A ``choose_fn`` for ``compare()`` that times ``ops`` (one example batch) instead of a zoo model."""
    if not ops:
        raise NoFitError("the captured graph has no costable ops", value=0, limit="at least one op")

    def choose_captured(ref: SystemRef, w: Workload) -> Choice:
        training = w.task in ("train", "finetune")
        from ..model.captured import estimate_ops
        from ..model.system import make_system
        e = estimate_ops(ops, ref.key, training=training, precision=w.precision,
                         lora_rank=w.lora_rank if w.task == "finetune" else None)
        sec, band, lnc = e.total_s, e.error_band, e.lnc
        ranks = make_system(ref.key).cores
        per_rank = tokens_per_example / sec                 # tokens/s of one accelerator rank
        per_inst = per_rank * ranks
        need = w.total_tokens / (per_inst * w.deadline_s)
        n = min(w.max_instances, 2 ** max(0, math.ceil(math.log2(max(need, 1.0)))))
        time_s = w.total_tokens / (per_inst * n)
        notes = [NOTE] + ([] if time_s <= w.deadline_s else
                          [f"misses the {w.deadline_s / 86400:g}-day deadline at --max-instances {w.max_instances}"])
        cfg = {"dp": ranks * n, "precision": w.precision, "lnc": lnc, "nodes": n}
        return Choice(system=ref, config=cfg, instances=n, time_s=time_s, tokens=w.total_tokens, busy=1.0,
                      error_band=float(band), metrics={"tokens_per_s": per_inst * n, "step_time_s": sec,
                                                        "accelerators": ranks * n, "tokens_per_example": tokens_per_example},
                      notes=tuple(notes) + tuple(e.notes))
    return choose_captured
