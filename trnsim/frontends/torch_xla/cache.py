"""Distinct graphs cached on disk by structure, the way the Neuron compile cache keeps compiled NEFFs:
``NEURON_COMPILE_CACHE_URL`` when it is a local path (``file://`` accepted), else trnsim's cache
directory.  A graph seen by an earlier run is a cache hit (no compilation on a real instance)."""
from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Optional, Sequence, Tuple

from ...model.opcost import default_cache_dir
from .recorder import Call

CACHE_ENV = "NEURON_COMPILE_CACHE_URL"


def graph_key(calls: Sequence[Call]) -> tuple:
    """The structure of a graph: every call's op, shapes, dtypes and non-float arguments, in order."""
    return tuple(c.key() for c in calls)


def graph_hash(key: tuple, salt: str = "") -> str:
    """A stable hex digest of a graph structure (and what it was estimated for)."""
    return hashlib.sha256((salt + repr(key)).encode()).hexdigest()[:32]


def cache_dir(env: Optional[dict] = None) -> Tuple[str, str]:
    """(directory, note): the local compile-cache directory and why it was chosen."""
    env = os.environ if env is None else env
    url = env.get(CACHE_ENV, "")
    if url.startswith("file://"):
        url = url[len("file://"):]
    if url and "://" not in url:
        return os.path.abspath(os.path.expanduser(url)), f"{CACHE_ENV}={url}"
    default = os.path.join(default_cache_dir(), "xla-graph-cache")
    note = f"{CACHE_ENV}={url} is not a local path; using {default}" if url else "trnsim cache directory"
    return default, note


class GraphCache:
    """One small JSON file per graph hash under the cache directory."""

    def __init__(self, directory: Optional[str] = None):
        self.dir, self.note = (directory, "given") if directory else cache_dir()
        self.hits = self.misses = 0

    def _path(self, h: str) -> str:
        return os.path.join(self.dir, f"MODULE_{h}", "graph.json")

    def lookup_or_store(self, h: str, meta: dict) -> bool:
        """True when graph ``h`` was cached by an earlier run; otherwise store it and return False."""
        p = self._path(h)
        if os.path.exists(p):
            self.hits += 1
            return True
        self.misses += 1
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            tmp = p + f".{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({**meta, "hash": h, "created": time.time()}, f)
            os.replace(tmp, p)
        except OSError:  # a read-only cache still lets the run go on; it only loses the hit next time
            pass
        return False
