"""Processes live as long as the run: pool workers die with a killed parent (SIGKILL included), a
SIGTERM ends a run with one line and exit 143 and takes its workers with it."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}

PARENT = textwrap.dedent("""
    import os, sys, time
    from trnsim.plan import backends
    pool = backends._executor(2)
    futs = [pool.submit(time.sleep, 60) for _ in range(2)]
    time.sleep(1.0)
    print(" ".join(str(p) for p in pool._processes), flush=True)
    time.sleep(60)
""")


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pids, timeout=10.0) -> list:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_pool_workers_die_with_their_parent(sig):
    p = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        workers = [int(x) for x in p.stdout.readline().split()]
        assert len(workers) == 2 and all(_alive(w) for w in workers)
        os.kill(p.pid, sig)
        p.wait(timeout=20)
        assert _wait_gone(workers) == [], "pool workers outlived their parent"
    finally:
        if p.poll() is None:
            p.kill()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_ends_a_plan_with_one_line_and_no_orphans():
    cmd = [sys.executable, "-m", "trnsim", "plan", "--model", "llama-3-70b", "--system", "trn2.48xlarge",
           "--count", "1,2,4,8,16,32", "--global-batch", "1024", "--workers", "2", "--json"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        # wait until the pool's workers exist, then stop the run
        kids = []
        end = time.monotonic() + 60
        while time.monotonic() < end and len(kids) < 2 and p.poll() is None:
            time.sleep(0.2)
            try:
                with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except FileNotFoundError:
                break
        if p.poll() is not None:
            pytest.skip("the plan finished before it could be interrupted")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 128 + signal.SIGTERM, (p.returncode, err)
        assert err.strip() == "trnsim: stopped by SIGTERM", err
        assert "Traceback" not in err
        assert _wait_gone(kids) == []
    finally:
        if p.poll() is None:
            p.kill()
