"""Peak memory of a kernel test suite run on trnsim (issue 14 §2), split into trnsim's share and the
test's own (its inputs and numpy golden).

    python bench/suite_memory.py /path/to/nki-samples [--per test|file|suite] [-k EXPR]
                                 [--tests test/unit] [--timeout 900] [--json]

Runs ``pytest <tests> --simulation-only`` under trnsim's import shims (as ``trnsim exec`` does),
each test (default), each file, or the whole suite in its own process, and reports per test:

- ``process``: the process's peak RSS (imports and collection included);
- ``test``: peak RSS while the test function ran;
- ``own``: peak RSS outside kernel launches -- the test's inputs and numpy golden, what the same
  test would need with its kernel calls replaced by nothing (plus what earlier launches retained);
- ``launch``: peak RSS inside ``trnsim.nki.harness.launch``, and ``trnsim +``: that peak minus the
  RSS when the launch began (trnsim's own working memory for the launch, outputs included);
- ``kept``: RSS a launch leaves behind beyond its outputs (traces of finished kernels, caches),
  and ``last_run``: what releasing ``last_run()`` (the one RunResult trnsim keeps) gives back
  (weighed with ``--per test`` only: dropping it would change what later tests of a process see).

Peaks come from ``VmHWM`` in ``/proc/self/status``, reset between phases by writing 5 to
``/proc/self/clear_refs`` (Linux >= 4.0); freed heap is returned with ``malloc_trim`` before RSS
is read, so retained memory is not confused with glibc's free lists.  This file is also the pytest
plugin (``-p suite_memory``) that takes these readings inside each child process.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_ENV = "SUITE_MEMORY_OUT"
RELEASE_ENV = "SUITE_MEMORY_RELEASE"  # "1": drop last_run() after each test to weigh it
KIB = 1024

# -- readings (used inside the child) ------------------------------------------------------------


def _status() -> Dict[str, int]:
    """VmRSS and VmHWM of this process, in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":")
                out[k] = int(v.split()[0]) * KIB
    return out


def _trim() -> None:
    """Give glibc's free heap back to the OS so RSS counts live memory only."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: RSS then includes free lists
        pass


_PROCESS_PEAK = [0]  # VmHWM is reset between phases, so the process's own peak is kept here


def _reset_peak() -> bool:
    _PROCESS_PEAK[0] = max(_PROCESS_PEAK[0], _status()["VmHWM"])
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _nbytes(x, seen=None) -> int:
    """Bytes of the numpy arrays in a kernel's return value (tuples, lists, dicts walked)."""
    seen = set() if seen is None else seen
    if id(x) in seen:
        return 0
    seen.add(id(x))
    if hasattr(x, "nbytes") and hasattr(x, "dtype"):
        return int(x.nbytes)
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(v, seen) for v in x)
    if isinstance(x, dict):
        return sum(_nbytes(v, seen) for v in x.values())
    return 0


class _Record:
    """The readings of one test inside the child."""

    def __init__(self, nodeid: str):
        self.nodeid = nodeid
        self.own_peak = 0          # peak RSS outside launches
        self.launch_peak = 0       # peak RSS inside launches
        self.trnsim_extra = 0      # max over launches: launch peak - RSS at launch start
        self.kept = 0              # max over launches: RSS after - before - outputs
        self.launches = 0
        self.rss_start = 0
        self.rss_end = 0
        self.last_run_held = 0
        self.outcome = "?"
        self.seconds = 0.0


_REC: Optional[_Record] = None
_DEPTH = [0]


def _wrap_launch(real):
    def launch(*args, **kwargs):
        rec = _REC
        if rec is None or _DEPTH[0]:
            return real(*args, **kwargs)  # outside a test, or the fast-forward rerun inside one
        rec.own_peak = max(rec.own_peak, _status()["VmHWM"])
        _trim()
        start = _status()["VmRSS"]
        _reset_peak()
        _DEPTH[0] += 1
        try:
            res = real(*args, **kwargs)
        finally:
            _DEPTH[0] -= 1
            peak = _status()["VmHWM"]
            rec.launch_peak = max(rec.launch_peak, peak)
            rec.trnsim_extra = max(rec.trnsim_extra, peak - start)
            rec.launches += 1
        _trim()
        after = _status()["VmRSS"]
        rec.kept = max(rec.kept, after - start - _nbytes(getattr(res, "outputs", None)))
        _reset_peak()
        return res
    launch.__wrapped__ = real
    return launch


def pytest_configure(config):
    """Plugin entry: meter every trnsim launch (``Kernel.run`` calls ``harness.launch``)."""
    from trnsim.nki import harness
    if not hasattr(harness.launch, "__wrapped__"):
        harness.launch = _wrap_launch(harness.launch)


def _write(obj: dict) -> None:
    path = os.environ.get(OUT_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(obj) + "\n")


try:
    import pytest as _pytest
except ImportError:  # pragma: no cover  (the parent needs no pytest)
    _pytest = None

if _pytest is not None:
    @_pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        """Meter one test function: peaks outside and inside launches, what stays held."""
        global _REC
        gc.collect()
        _trim()
        rec = _REC = _Record(item.nodeid)
        rec.rss_start = _status()["VmRSS"]
        _reset_peak()
        t0 = time.perf_counter()
        outcome = yield
        rec.seconds = time.perf_counter() - t0
        rec.own_peak = max(rec.own_peak, _status()["VmHWM"])
        _REC = None
        rec.outcome = "failed" if outcome.excinfo else "passed"
        if outcome.excinfo:
            rec.error = f"{outcome.excinfo[0].__name__}: {str(outcome.excinfo[1])[:300]}"
        gc.collect()
        _trim()
        rec.rss_end = _status()["VmRSS"]
        from trnsim.nki import harness
        # what the one RunResult trnsim keeps holds: weighed by dropping it, which would change
        # what later tests of the same process see, so only when each test has its own process
        if os.environ.get(RELEASE_ENV) == "1" and harness.last_run() is not None:
            harness._last.run = None
            gc.collect()
            _trim()
            rec.last_run_held = max(0, rec.rss_end - _status()["VmRSS"])
        _write(vars(rec))

    def pytest_sessionfinish(session):
        """The process's own peak RSS (imports and collection included); ru_maxrss would miss
        the phases before each VmHWM reset, so the readings taken before the resets count."""
        _write({"process_maxrss": max(_PROCESS_PEAK[0], _status()["VmHWM"])})

# -- the parent: run children, collect, print ------------------------------------------------------


def _env(samples: str, out: str, release: bool = False) -> dict:
    from trnsim.compat import shim_env
    env = shim_env()
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(samples, "src"), HERE, env["PYTHONPATH"]])
    env[OUT_ENV] = out
    env[RELEASE_ENV] = "1" if release else "0"
    return env


def _pytest_cmd(targets: List[str], extra: List[str]) -> List[str]:
    return [sys.executable, "-m", "pytest", *targets, "--simulation-only", "-q",
            "-p", "no:cacheprovider", "-p", "suite_memory", *extra]


def collect(samples: str, tests: str, kexpr: Optional[str]) -> List[str]:
    """Test ids of the suite that ``--simulation-only`` keeps."""
    extra = ["--collect-only"] + (["-k", kexpr] if kexpr else [])
    p = subprocess.run(_pytest_cmd([tests], extra), cwd=samples, env=_env(samples, os.devnull),
                       capture_output=True, text=True, timeout=600)
    ids = [ln.strip() for ln in p.stdout.splitlines() if "::" in ln and not ln.startswith(" ")]
    if not ids:
        raise SystemExit(f"no tests collected under {samples}/{tests}:\n{p.stdout[-2000:]}"
                         f"{p.stderr[-2000:]}")
    return ids


def run_group(samples: str, targets: List[str], timeout: float, release: bool = False) -> dict:
    """Run ``targets`` in one child process: exit status, its peak RSS and per-test records
    (``release``: weigh ``last_run()`` after each test by dropping it; for one-test processes)."""
    fd, out = tempfile.mkstemp(prefix="suite_memory_", suffix=".jsonl")
    os.close(fd)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(_pytest_cmd(targets, []), cwd=samples, env=_env(samples, out, release),
                           capture_output=True, text=True, timeout=timeout)
        status, tail = p.returncode, (p.stdout + p.stderr)[-1500:]
    except subprocess.TimeoutExpired:
        status, tail = "timeout", ""
    with open(out) as f:
        lines = [json.loads(ln) for ln in f if ln.strip()]
    os.unlink(out)
    recs = [r for r in lines if "nodeid" in r]
    peak = max((r["process_maxrss"] for r in lines if "process_maxrss" in r), default=None)
    for r in recs:
        r["process_maxrss"] = peak
    return {"targets": targets, "status": status, "process_maxrss": peak, "records": recs,
            "seconds": round(time.perf_counter() - t0, 1), "tail": tail}


def groups(ids: List[str], per: str) -> List[List[str]]:
    """The test ids each child process runs."""
    if per == "test":
        return [[i] for i in ids]
    if per == "file":  # the ids themselves, so a -k selection holds inside each file too
        files: Dict[str, List[str]] = {}
        for i in ids:
            files.setdefault(i.split("::")[0], []).append(i)
        return list(files.values())
    return [list(ids)]


def measure(samples: str, *, tests: str = "test/unit", per: str = "test",
            kexpr: Optional[str] = None, timeout: float = 900.0, progress=None,
            log: Optional[str] = None) -> dict:
    """Run the suite as ``per`` says and return every test's readings plus the totals; ``log``:
    a JSON-lines file that gets each child's readings as soon as it ends (long runs)."""
    samples = os.path.abspath(samples)
    ids = collect(samples, tests, kexpr)
    runs = []
    todo = groups(ids, per)
    if progress:
        progress(0, len(todo), None)
    for g in todo:
        runs.append(run_group(samples, g, timeout, release=per == "test"))
        if log:
            with open(log, "a") as f:
                f.write(json.dumps(runs[-1], default=str) + "\n")
        if progress:
            progress(len(runs), len(todo), g)
    recs = [r for run in runs for r in run["records"]]
    mib = 1 << 20

    def top(key):
        return max((r[key] for r in recs if r.get(key) is not None), default=0) / mib

    return {"samples": samples, "per": per, "tests": len(ids), "runs": runs,
            "records": recs, "summary": {
                "passed": sum(r["outcome"] == "passed" for r in recs),
                "failed": sum(r["outcome"] == "failed" for r in recs),
                "not_run": len(ids) - len(recs),
                "max_process_mib": round(top("process_maxrss"), 1),
                "max_own_mib": round(top("own_peak"), 1),
                "max_launch_mib": round(top("launch_peak"), 1),
                "max_trnsim_extra_mib": round(top("trnsim_extra"), 1),
                "max_kept_mib": round(top("kept"), 1),
                "max_last_run_mib": round(top("last_run_held"), 1)}}


def _mib(v) -> str:
    return "-" if v is None else f"{v / (1 << 20):,.0f}"


def main(argv=None) -> int:
    """CLI: run, then print a table (or ``--json``)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("samples", help="the nki-samples checkout (its src/ goes on PYTHONPATH)")
    ap.add_argument("--tests", default="test/unit", help="test folder or file inside SAMPLES")
    ap.add_argument("--per", choices=("test", "file", "suite"), default="test",
                    help="what one child process runs")
    ap.add_argument("-k", dest="kexpr", help="pytest -k expression to pick tests")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per child process")
    ap.add_argument("--log", help="append each child's readings to this JSON-lines file")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.samples):
        msg = f"{args.samples} is not a folder"
        print(json.dumps({"error": {"rule": "bench-samples-path", "message": msg,
                                    "value": args.samples}}) if args.json else msg)
        return 2
    from trnsim.cli.output import error_console
    from rich.progress import Progress
    err = error_console()
    with Progress(console=err, disable=args.json, transient=True) as bar:
        task = bar.add_task("collecting tests", total=None)

        def step(done, total, group):
            name = group[0].split("::")[-1][:60] if group else "running"
            bar.update(task, completed=done, total=total, description=name)

        res = measure(args.samples, tests=args.tests, per=args.per, kexpr=args.kexpr,
                      timeout=args.timeout, progress=step, log=args.log)
    if args.json:
        print(json.dumps(res, indent=1, default=str))
        return 0
    from trnsim.cli.output import console, table
    cols = ("test", "result", "s", "process", "peak", "own", "launch", "trnsim +", "kept",
            "last_run")
    rows = []
    for r in res["records"]:
        rows.append((r["nodeid"].split("::", 1)[-1], r["outcome"], f"{r['seconds']:.0f}",
                     _mib(r["process_maxrss"]), _mib(max(r["own_peak"], r["launch_peak"])),
                     _mib(r["own_peak"]), _mib(r["launch_peak"]), _mib(r["trnsim_extra"]),
                     _mib(r["kept"]), _mib(r["last_run_held"])))
    out = console()
    out.print(table(f"peak RSS (MiB) of {res['tests']} tests, one process per {res['per']}",
                    cols, rows))
    out.print(", ".join(f"{k} {v}" for k, v in res["summary"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
