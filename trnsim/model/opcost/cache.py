"""The on-disk cache of simulated kernel times: one SQLite file under the user's cache directory,
safe with many concurrent writers (WAL journal, busy timeout, ``INSERT OR IGNORE``)."""
from __future__ import annotations

import json
import os
import sqlite3
import time
from typing import Dict, Iterable, Optional, Tuple

from ...errors import ConfigError

DB_NAME = "opcost.sqlite"
BUSY_TIMEOUT_S = 60.0  # planner processes may all write at once; waiting beats failing
SCHEMA = """
CREATE TABLE IF NOT EXISTS op_times (
    key TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    kernel TEXT NOT NULL,
    version INTEGER NOT NULL,
    shape TEXT NOT NULL,
    dtype TEXT NOT NULL,
    target TEXT NOT NULL,
    hw_hash TEXT NOT NULL,
    seconds REAL NOT NULL,
    sim_wall_s REAL,
    created REAL
);
CREATE INDEX IF NOT EXISTS op_times_scope ON op_times(scope);
"""

Row = Tuple[str, int, str, str, float]  # kernel, version, shape text, dtype, seconds


def default_cache_dir() -> str:
    """``TRNSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/trnsim``, else ``~/.cache/trnsim``."""
    d = os.environ.get("TRNSIM_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "trnsim")


def _open_with_retry(path: str) -> sqlite3.Connection:
    """Open the database, switch it to WAL and create the table.  Switching the journal mode and the
    schema script can answer "database is locked" at once, without SQLite's busy handler, while another
    process is creating the same file (the planner's workers start together): retry until the busy
    timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.005
    while True:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(SCHEMA)
            return conn
        except sqlite3.OperationalError as e:
            conn.close()
            if "locked" not in str(e) and "busy" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


class CostCache:
    """Simulated times keyed by hash; rows are never updated, only added."""

    def __init__(self, cache_dir: Optional[str] = None):
        self.dir = cache_dir or default_cache_dir()
        self.path = os.path.join(self.dir, DB_NAME)
        self._conn: Optional[sqlite3.Connection] = None
        self._pid = None

    def _connect(self) -> sqlite3.Connection:
        # a connection must not cross a fork: reopen in a child process
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            os.makedirs(self.dir, exist_ok=True)
            conn = _open_with_retry(self.path)
        except (OSError, sqlite3.Error) as e:
            raise ConfigError(f"cannot open the op-cost cache {self.path}: {e}", rule="opcost-cache",
                              value=self.path,
                              hint="set TRNSIM_CACHE_DIR to a writable directory") from None
        self._conn, self._pid = conn, os.getpid()
        return conn

    def rows(self, scope: str) -> Iterable[Row]:
        """Every cached row of one scope (hardware + timing model + target)."""
        cur = self._connect().execute(
            "SELECT kernel, version, shape, dtype, seconds FROM op_times WHERE scope = ?", (scope,))
        return cur.fetchall()

    def get(self, key: str) -> Optional[float]:
        """The seconds stored under ``key``, or None."""
        r = self._connect().execute("SELECT seconds FROM op_times WHERE key = ?", (key,)).fetchone()
        return None if r is None else float(r[0])

    def put(self, key: str, scope: str, kernel: str, version: int, shape: str, dtype: str,
            target: str, hw_hash: str, seconds: float, sim_wall_s: float = 0.0) -> None:
        """Insert one row; a row another process wrote first under the same key wins."""
        self._connect().execute(
            "INSERT OR IGNORE INTO op_times VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (key, scope, kernel, int(version), shape, dtype, target, hw_hash, float(seconds),
             float(sim_wall_s), time.time()))

    def count(self, scope: Optional[str] = None) -> int:
        """Number of rows (of one scope, or all)."""
        c = self._connect()
        if scope is None:
            return c.execute("SELECT COUNT(*) FROM op_times").fetchone()[0]
        return c.execute("SELECT COUNT(*) FROM op_times WHERE scope = ?", (scope,)).fetchone()[0]

    def close(self) -> None:
        """Close this process's connection (a later call reopens it)."""
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None


def shape_of(text: str) -> Dict[str, int]:
    """Inverse of keys.shape_text."""
    return {k: int(v) for k, v in json.loads(text).items()}
