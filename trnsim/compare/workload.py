"""The workload ``trnsim compare`` prices: a zoo model (or a captured graph), a task and its size."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

from ..errors import ConfigError

TASKS = ("train", "infer", "finetune")
TRAINING_TASKS = ("train", "finetune")
DAY_S = 86400.0


class WorkloadError(ConfigError):
    """A workload parameter out of range."""
    rule = "workload"


@dataclass(frozen=True)
class Workload:
    """What to run. Training: ``tokens`` to train on, finished within ``deadline_s`` if ``max_instances``
    allows. Inference: ``rate`` requests/s of ``input_len`` + ``output_len`` tokens at the SLOs, for
    ``tokens`` output tokens (default: a 30-day month at that rate)."""
    model: str
    task: str = "train"
    tokens: Optional[float] = None
    seq: int = 4096
    batch_tokens: float = 4 * 1024 * 1024    # tokens per optimizer step (Llama-3 style 4M)
    deadline_s: float = 30 * DAY_S
    max_instances: int = 1024
    precision: str = "bf16"
    input_len: int = 2048
    output_len: int = 512
    rate: float = 10.0
    slo_tpot_ms: Optional[float] = None
    slo_ttft_ms: Optional[float] = None
    month_s: float = 30 * DAY_S
    lora_rank: int = 16
    lora_targets: str = "q,k,v,o"
    framework: Optional[str] = None
    runs_per_month: float = 0.0

    def __post_init__(self):
        if self.task not in TASKS:
            raise WorkloadError(f"unknown task {self.task!r}", limit=TASKS, value=self.task)
        for k in ("seq", "input_len", "output_len", "max_instances"):
            if int(getattr(self, k)) < 1:
                raise WorkloadError(f"{k} must be at least 1", limit=">= 1", value=getattr(self, k))
        for k in ("batch_tokens", "deadline_s", "rate"):
            if not getattr(self, k) > 0:
                raise WorkloadError(f"{k} must be positive", limit="> 0", value=getattr(self, k))
        if self.tokens is not None and not self.tokens > 0:
            raise WorkloadError("--tokens must be positive", limit="> 0", value=self.tokens)
        for k in ("slo_tpot_ms", "slo_ttft_ms"):
            v = getattr(self, k)
            if v is not None and not v > 0:
                raise WorkloadError(f"{k} must be positive", limit="> 0", value=v)
        if self.task in TRAINING_TASKS and self.tokens is None:
            raise WorkloadError(f"a {self.task} comparison needs --tokens (tokens to train on per run)", value=None,
                                hint="e.g. --tokens 1e12")
        if self.runs_per_month < 0:
            raise WorkloadError("--runs-per-month must be >= 0", limit=">= 0", value=self.runs_per_month)
        if self.task == "finetune":
            from ..model.lora import make_lora
            make_lora(self.lora_rank, self.lora_targets)   # a bad rank or target fails here, before any estimate

    @property
    def lora(self) -> dict:
        """The estimator's LoRA arguments for a fine-tuning task (empty for pre-training)."""
        if self.task != "finetune":
            return {}
        return {"lora_rank": self.lora_rank, "lora_targets": self.lora_targets}

    @property
    def total_tokens(self) -> float:
        """Training tokens, or output tokens served (``tokens``, else a month at ``rate``)."""
        if self.tokens is not None:
            return float(self.tokens)
        return self.rate * self.output_len * self.month_s

    def to_dict(self) -> dict:
        """Plain dict for JSON output."""
        return {**asdict(self), "total_tokens": self.total_tokens}
