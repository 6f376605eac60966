"""The parallelism planner: enumerate TP/PP/DP/EP/CP/ZeRO/micro-batch/recompute/LNC layouts, drop the
ones that break a rule or do not fit (counted per rule), estimate the rest with the model layer and rank
them by step time, cost or energy; on a local process pool or on Ray."""
from .backends import BACKENDS, default_workers
from .errors import PlanError
from .evaluate import Evaluated, Job, evaluate_batch
from .objective import OBJECTIVES, joules_per_step, usd_per_step
from .parquet import check_parquet_target, write_parquet
from .planner import enumerate_configs, plan
from .result import Drop, PlanResult, Ranked
from .rules import RULES, Config, ModelFacts, violation
from .space import SearchSpace, parse_space_args

__all__ = ["BACKENDS", "Config", "Drop", "Evaluated", "Job", "ModelFacts", "OBJECTIVES", "PlanError",
           "PlanResult", "RULES", "Ranked", "SearchSpace", "check_parquet_target", "default_workers",
           "enumerate_configs", "evaluate_batch", "joules_per_step", "parse_space_args", "plan", "usd_per_step",
           "violation", "write_parquet"]
