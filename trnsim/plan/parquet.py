"""Every evaluated configuration of a plan as a Parquet table (optional extra ``parquet``: pyarrow)."""
from __future__ import annotations

import os

from ..outputs import atomic_path, check_target
from .errors import PlanError
from .result import PlanResult

PARQUET_HINT = "pip install 'trnsim[parquet]'"


def check_parquet_target(path: str) -> None:
    """Fail before a search, not after it, when pyarrow is missing or ``path``'s folder does not exist."""
    _pyarrow(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or os.path.isdir(path):
        raise PlanError(f"cannot write {path}: {'it is a folder' if os.path.isdir(path) else 'no such folder'}",
                        rule="parquet", limit="a file path in an existing folder", value=path)
    check_target(path, "--out")  # a device or FIFO is refused, never handed to pyarrow


def _pyarrow(path: str):
    try:
        import pyarrow as pa  # type: ignore
        import pyarrow.parquet as pq  # type: ignore
    except ImportError:
        raise PlanError("--out needs pyarrow, which is not installed", rule="parquet", limit="pyarrow installed",
                        value=path, hint=PARQUET_HINT) from None
    return pa, pq


def write_parquet(result: PlanResult, path: str) -> int:
    """Write ``result.records()`` to ``path``; returns the number of rows."""
    pa, pq = _pyarrow(path)
    recs = result.records()
    table = pa.Table.from_pylist(recs) if recs else pa.table({})
    meta = {b"trnsim.model": result.model.encode(), b"trnsim.system": result.system.encode(),
            b"trnsim.objective": result.objective.encode()}
    table = table.replace_schema_metadata(meta)
    try:
        with atomic_path(path, "--out") as tmp:
            pq.write_table(table, tmp)
    except OSError as e:
        raise PlanError(f"cannot write {path}: {e}", rule="parquet", value=path) from None
    return len(recs)
