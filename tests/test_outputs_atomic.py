"""Outputs are written atomically: a writer killed mid-write leaves the previous file intact (never a
truncated or empty one), a full disk or a missing folder is an error naming the path with the old file
kept, and a target that is not a regular file (a device) is refused without being touched."""
import errno
import os
import signal
import stat
import subprocess
import sys
import textwrap

import pytest

from trnsim.cli.main import main
from trnsim.errors import ConfigError
from trnsim.outputs import atomic_output, atomic_path, check_target, write_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WRITER = textwrap.dedent("""
    import sys, time
    from trnsim.lifetime import install_signal_handlers
    from trnsim.outputs import atomic_output
    install_signal_handlers()   # as the trnsim command line does
    with atomic_output(sys.argv[1]) as f:
        f.write("new-" * 100000)
        f.flush()
        print("writing", flush=True)
        time.sleep(60)
        f.write("end")
""")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_writer_leaves_the_previous_file(tmp_path, sig):
    target = tmp_path / "report.html"
    target.write_text("previous good report")
    env = {**os.environ, "PYTHONPATH": ROOT}
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "writing"
        os.kill(p.pid, sig)
        p.wait(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert target.read_text() == "previous good report"
    leftovers = [n for n in os.listdir(tmp_path) if n != "report.html"]
    # SIGKILL gives no chance to clean up: at most the hidden temporary remains, never the target
    assert all(n.startswith(".report.html.") for n in leftovers), leftovers
    if sig == signal.SIGTERM:
        assert leftovers == []


def test_finished_write_replaces_the_file_with_its_permissions(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old")
    os.chmod(target, 0o640)
    write_text(str(target), "a,b\n1,2\n")
    assert target.read_text() == "a,b\n1,2\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert os.listdir(tmp_path) == ["out.csv"]


def test_full_disk_keeps_the_old_file_and_names_the_path(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(ConfigError) as e:
        write_text(str(target), "new")
    assert e.value.rule == "output-write" and str(target) in e.value.message
    assert "No space left" in e.value.message
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["out.json"]


def test_writer_exception_removes_the_temporary(tmp_path):
    target = tmp_path / "t.parquet"
    with pytest.raises(RuntimeError):
        with atomic_path(str(target)) as tmp:
            open(tmp, "w").write("half")
            raise RuntimeError("writer failed")
    assert os.listdir(tmp_path) == []


def test_missing_folder_is_refused(tmp_path):
    with pytest.raises(ConfigError) as e:
        with atomic_output(str(tmp_path / "no" / "f.txt")):
            pass
    assert e.value.rule == "output-path" and "does not exist" in e.value.message


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_refused(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    os.chmod(d, 0o555)
    try:
        with pytest.raises(ConfigError) as e:
            write_text(str(d / "f.txt"), "x")
        assert e.value.rule == "output-write"
    finally:
        os.chmod(d, 0o755)


def test_device_target_is_refused_and_untouched():
    before = os.stat(os.devnull)
    with pytest.raises(ConfigError) as e:
        check_target(os.devnull, "--out")
    assert e.value.rule == "output-path" and "not a regular file" in e.value.message
    after = os.stat(os.devnull)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_fifo_target_is_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError):
        write_text(str(fifo), "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_cli_device_output_is_exit_2(tmp_path, capsys):
    k = tmp_path / "k.py"
    k.write_text("import neuronxcc.nki.language as nl\n\ndef copy(a):\n"
                 "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
                 "    nl.store(out, nl.load(a))\n    return out\n")
    rc = main(["kernel", f"{k}::copy", "--arg", "a=128x128", "--html", os.devnull, "--json"])
    out = capsys.readouterr().out
    assert rc == 2 and '"output-path"' in out
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
