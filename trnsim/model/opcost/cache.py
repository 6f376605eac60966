"""The on-disk cache of simulated kernel times: one SQLite file under the user's cache directory,
safe with many concurrent writers (WAL journal, busy timeout, ``INSERT OR IGNORE``).

Nothing read from it is trusted: a time that is not a finite number in (0, ``max_seconds``] is deleted
and simulated again, and a file SQLite cannot read (garbage pages, not a database) is moved aside and
rebuilt; both with a warning that names the file."""
from __future__ import annotations

import json
import math
import os
import sqlite3
import time
import warnings
from typing import Dict, Iterable, Optional, Tuple

from ...checks import limits
from ...errors import ConfigError, TrnsimWarning

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


class CacheWarning(TrnsimWarning):
    """The op-cost cache held damaged rows or a damaged file; trnsim dropped or rebuilt them."""
    rule = "opcost-cache"


def max_seconds() -> float:
    """The largest simulated time a cached row may hold (``[opcost_cache] max_seconds``)."""
    return float(limits().get("opcost_cache", {}).get("max_seconds", 3600.0))


def valid_seconds(v) -> bool:
    """A cached time is usable: a finite real number in (0, max_seconds]."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        and 0.0 < float(v) <= max_seconds()


def _corrupt(e: sqlite3.DatabaseError) -> bool:
    """The file itself is damaged (as opposed to busy or locked by another process)."""
    text = str(e).lower()
    return not isinstance(e, sqlite3.OperationalError) or "malformed" in text or "not a database" in text \
        or "corrupt" in text


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
            try:
                conn = _open_with_retry(self.path)
                conn.execute("SELECT COUNT(*) FROM op_times").fetchone()
            except sqlite3.DatabaseError as e:
                if not _corrupt(e):
                    raise
                self._rebuild(e)
                conn = _open_with_retry(self.path)
        except (OSError, sqlite3.Error) as e:
            raise ConfigError(f"cannot open the op-cost cache {self.path}: {e}", rule="opcost-cache",
                              value=self.path,
                              hint="set TRNSIM_CACHE_DIR to a writable directory") from None
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _rebuild(self, err: Exception) -> None:
        """Move a damaged cache file aside (kept for a bug report) so a fresh one is built."""
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = None
        aside = f"{self.path}.corrupt-{int(time.time())}"
        for suffix in ("", "-wal", "-shm"):
            try:
                os.replace(self.path + suffix, aside + suffix)
            except FileNotFoundError:
                pass
        warnings.warn(CacheWarning(f"the op-cost cache {self.path} could not be read ({err}); moved to {aside} "
                                   "and rebuilt (its kernel times are simulated again)"), stacklevel=3)

    def _query(self, sql: str, args: tuple = ()) -> list:
        """Run one statement; a file found damaged mid-run is rebuilt and the statement run again."""
        try:
            return self._connect().execute(sql, args).fetchall()
        except sqlite3.DatabaseError as e:
            if not _corrupt(e):
                raise
            self._rebuild(e)
            return self._connect().execute(sql, args).fetchall()

    def _drop(self, keys: list, why: str) -> None:
        """Delete damaged rows (they are simulated again) and say so once, naming the file."""
        for k in keys:
            self._query("DELETE FROM op_times WHERE key = ?", (k,))
        warnings.warn(CacheWarning(f"the op-cost cache {self.path} held {len(keys)} impossible kernel time(s) "
                                   f"({why}); dropped, they are simulated again"), stacklevel=3)

    def rows(self, scope: str) -> Iterable[Row]:
        """Every valid cached row of one scope (hardware + timing model + target); damaged ones dropped."""
        got = self._query("SELECT key, kernel, version, shape, dtype, seconds FROM op_times WHERE scope = ?",
                          (scope,))
        bad = [r[0] for r in got if not valid_seconds(r[5])]
        if bad:
            self._drop(bad, f"not a time in (0, {max_seconds():g}] s")
        return [tuple(r[1:]) for r in got if valid_seconds(r[5])]

    def get(self, key: str) -> Optional[float]:
        """The seconds stored under ``key``, or None (also when the stored time is impossible)."""
        r = self._query("SELECT seconds FROM op_times WHERE key = ?", (key,))
        if not r:
            return None
        if not valid_seconds(r[0][0]):
            self._drop([key], f"{r[0][0]!r} s")
            return None
        return float(r[0][0])

    def put(self, key: str, scope: str, kernel: str, version: int, shape: str, dtype: str,
            target: str, hw_hash: str, seconds: float, sim_wall_s: float = 0.0) -> None:
        """Insert one row; a row another process wrote first under the same key wins."""
        if not valid_seconds(seconds):
            return  # never store a time a later read would refuse
        self._query(
            "INSERT OR IGNORE INTO op_times VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (key, scope, kernel, int(version), shape, dtype, target, hw_hash, float(seconds),
             float(sim_wall_s), time.time()))

    def count(self, scope: Optional[str] = None) -> int:
        """Number of rows (of one scope, or all)."""
        if scope is None:
            return self._query("SELECT COUNT(*) FROM op_times")[0][0]
        return self._query("SELECT COUNT(*) FROM op_times WHERE scope = ?", (scope,))[0][0]

    def close(self) -> None:
        """Close this process's connection (a later call reopens it)."""
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None


def shape_of(text: str) -> Dict[str, int]:
    """Inverse of keys.shape_text."""
    return {k: int(v) for k, v in json.loads(text).items()}
