"""From command-line style options to ``compare()`` inputs: the workload, the price book, the power model.
Plain functions, so notebooks and the CLI build a comparison the same way."""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

from ..checks import check_params
from ..cost import PriceBook, load_power_model, parse_price_args
from ..cost.power import PowerModel
from .workload import DAY_S, Workload


def make_workload(model, task: str = "train", tokens: Optional[float] = None, seq: int = 4096,
                  batch_tokens: float = 4 * 1024 * 1024, deadline_days: float = 30.0, max_instances: int = 1024,
                  precision: str = "bf16", input_len: int = 2048, output_len: int = 512, rate: float = 10.0,
                  slo_tpot_ms: Optional[float] = None, slo_ttft_ms: Optional[float] = None,
                  lora_rank: Optional[int] = None, lora_targets: Optional[str] = None,
                  framework: Optional[str] = None, runs_per_month: float = 0.0) -> Workload:
    """A ``Workload`` from the CLI's units (days for the deadline)."""
    check_params(model=model, task=task, precision=precision, tokens=tokens, seq=seq, batch_tokens=batch_tokens, deadline_days=deadline_days,
                 max_instances=max_instances, input_len=input_len, output_len=output_len, rate=rate,
                 slo_tpot_ms=slo_tpot_ms, slo_ttft_ms=slo_ttft_ms)
    return Workload(model=model, task=task, tokens=tokens, seq=int(seq), batch_tokens=float(batch_tokens),
                    deadline_s=float(deadline_days) * DAY_S, max_instances=int(max_instances), precision=precision,
                    input_len=int(input_len), output_len=int(output_len), rate=float(rate),
                    slo_tpot_ms=slo_tpot_ms, slo_ttft_ms=slo_ttft_ms,
                    lora_rank=16 if lora_rank is None else int(lora_rank),
                    lora_targets=lora_targets or "q,k,v,o", framework=framework,
                    runs_per_month=float(runs_per_month or 0.0))


def make_prices(kind: str = "on-demand", price_args: Sequence[str] = (), price_files: Iterable[str] = ()) -> PriceBook:
    """Published prices of ``kind`` with ``--prices`` files, then ``--price SYSTEM=USD`` on top."""
    return PriceBook.load(kind=kind, overrides=parse_price_args(price_args), override_files=list(price_files))


def make_power(pue: Optional[float] = None, chip_watts: Optional[dict] = None) -> PowerModel:
    """The power model with an optional PUE and chip-watts override."""
    check_params(pue=pue)
    return load_power_model().with_overrides(pue=pue, chip_watts=chip_watts)
