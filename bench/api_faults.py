"""Wrong-typed and out-of-range values for the Python API's parameters: each call must either work or
raise a TrnsimError; prints how many raised a raw Python error (TypeError, AttributeError, ...) instead.

    PYTHONPATH=. python bench/api_faults.py
"""
from __future__ import annotations

import sys
from collections import Counter

BAD = [None, 5, 1.5, "x", [], {}, float("nan"), True, -1, 0]


def calls():
    """(label, thunk) for every parameter x bad value."""
    from trnsim import api
    from trnsim.compare import parse_systems
    from trnsim.compare.options import make_prices, make_workload
    from trnsim.fabric import collective
    from trnsim.model import estimate_training
    from trnsim.plan import plan
    table = {
        "plan.model": lambda v: plan(v, "trn2.48xlarge", global_batch=8),
        "plan.system": lambda v: plan("llama-3-8b", v, global_batch=8),
        "plan.objective": lambda v: plan("llama-3-8b", "trn2.48xlarge", global_batch=8, objective=v),
        "plan.space": lambda v: plan("llama-3-8b", "trn2.48xlarge", global_batch=8, space=v),
        "plan.precision": lambda v: plan("llama-3-8b", "trn2.48xlarge", global_batch=8, precision=v),
        "estimate.instance": lambda v: estimate_training("llama-3-8b", v),
        "estimate.precision": lambda v: estimate_training("llama-3-8b", precision=v),
        "estimate.recompute": lambda v: estimate_training("llama-3-8b", tp=8, recompute=v),
        "estimate.lnc": lambda v: estimate_training("llama-3-8b", "trn2.48xlarge", tp=8, lnc=v),
        "estimate.sparsity": lambda v: estimate_training("llama-3-8b", tp=8, sparsity=v),
        "estimate.sp": lambda v: estimate_training("llama-3-8b", tp=8, sp=v),
        "estimate.comm": lambda v: estimate_training("llama-3-8b", tp=8, comm=v),
        "workload.task": lambda v: make_workload("llama-3-8b", v, tokens=1e9),
        "workload.precision": lambda v: make_workload("llama-3-8b", "train", tokens=1e9, precision=v),
        "prices.kind": lambda v: make_prices(v),
        "prices.args": lambda v: make_prices("on-demand", [v] if v is not None else v),
        "systems": lambda v: parse_systems(v, "train"),
        "collective.op": lambda v: collective(v, "trn2.48xlarge", 1024),
        "collective.system": lambda v: collective("all-reduce", v, 1024),
        "collective.size": lambda v: collective("all-reduce", "trn2.48xlarge", v),
        "make_inputs.target": lambda v: api.make_inputs(["a=128x128"], target=v),
        "make_inputs.specs": lambda v: api.make_inputs(v),
        "load_kernel": lambda v: api.load_kernel(v),
    }
    for label, fn in table.items():
        for v in BAD:
            yield f"{label}={v!r}", (lambda fn=fn, v=v: fn(v))


def main() -> int:
    """Run every call and print the raw errors and the totals."""
    from trnsim.errors import TrnsimError
    c: Counter = Counter()
    for label, thunk in calls():
        try:
            thunk()
            c["worked"] += 1
        except TrnsimError:
            c["TrnsimError"] += 1
        except Exception as e:  # noqa: BLE001 - what this bench counts
            c["raw Python error"] += 1
            print(f"{label}: {type(e).__name__}: {str(e)[:100]}")
    print(f"{sum(c.values())} calls: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
