"""``make stress`` (scripts/stress): a command run again and again beside CPU hogs, stopping at
the first failing run and naming it; the hogs it starts are stopped however it ends.

A stand-in command replaces the process lane here, so each case takes a second.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.process import ROOT, wait_for

pytestmark = pytest.mark.process  # it runs the script, and the hogs it starts

SCRIPT = ROOT / "scripts" / "stress"
#: counts its runs in the file it is given and fails the run numbered ``fail`` (0: never);
#: each run also prints how many ``yes`` processes its parent (the script) has running
RUN = """
import os, sys
from pathlib import Path

counter, fail = Path(sys.argv[1]), int(sys.argv[2])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
hogs = 0
for entry in os.listdir("/proc"):
    try:
        stat = Path(f"/proc/{entry}/stat").read_text()
    except (OSError, ValueError):
        continue
    name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
    if name == "yes" and int(fields.split()[1]) == os.getppid() and fields[0] != "Z":
        hogs += 1
print(f"run {n}: {hogs} hogs", flush=True)
sys.exit(3 if n == fail else 0)
"""


def stress(tmp_path: Path, runs: int, fail: int) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", RUN, str(tmp_path / "runs"), str(fail)]
    script = subprocess.Popen(
        ["bash", str(SCRIPT), *command],
        env={**os.environ, "STRESS_RUNS": str(runs), "STRESS_HOGS": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_default_signals,
    )
    try:
        out, err = script.communicate(timeout=60)
    finally:
        end_group(script)
    return subprocess.CompletedProcess(script.args, script.returncode, out, err)


def end_group(script: subprocess.Popen[str]) -> None:
    """Whatever the script left running in its session (hogs it failed to stop) is killed,
    so a failing case leaves nothing behind."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(script.pid, signal.SIGKILL)
    script.wait()


def _default_signals() -> None:
    # a suite started in the background inherits an ignored SIGINT, which bash cannot trap
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def hogs(output: str) -> list[int]:
    found = re.search(r"^stress: 2 CPU hogs running \((\d+) (\d+)\);", output, flags=re.M)
    assert found, output
    return [int(pid) for pid in found.groups()]


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_every_run_has_two_hogs_beside_it_and_all_passing_says_so(tmp_path):
    done = stress(tmp_path, runs=3, fail=0)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line for line in done.stdout.splitlines() if line.startswith("run ")] == [
        "run 1: 2 hogs",
        "run 2: 2 hogs",
        "run 3: 2 hogs",
    ]
    assert "stress: all 3 runs passed" in done.stdout
    assert not any(running(pid) for pid in hogs(done.stdout))


def test_the_first_failing_run_ends_the_runs_is_named_and_the_hogs_stop(tmp_path):
    done = stress(tmp_path, runs=4, fail=2)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "stress: run 2 of 4 FAILED (exit status 3); runs passed before it: 1" in done.stdout
    assert "run 3" not in done.stdout and (tmp_path / "runs").read_text() == "2"
    assert not any(running(pid) for pid in hogs(done.stdout))


def test_ctrl_c_stops_the_run_and_the_hogs(tmp_path):
    """The terminal's Ctrl-C reaches the whole foreground group: the run ends, and the script's
    trap stops the hogs (which ignore SIGINT, being background jobs of a script)."""
    waits = "print('waiting', flush=True); import time; time.sleep(60)"
    with subprocess.Popen(
        ["bash", str(SCRIPT), sys.executable, "-c", waits],
        env={**os.environ, "STRESS_RUNS": "5", "STRESS_HOGS": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=_default_signals,
    ) as script:
        assert script.stdout is not None
        lines: list[str] = []
        try:
            for line in script.stdout:
                lines.append(line)
                if line.startswith("waiting"):
                    break
            pids = hogs("".join(lines))
            assert all(running(pid) for pid in pids)
            os.killpg(script.pid, signal.SIGINT)
            assert script.wait(timeout=30) == 130
            lines += script.stdout.readlines()
        finally:
            end_group(script)
    wait_for(lambda: not any(running(pid) for pid in pids), timeout=10, what="the hogs to stop")
    assert "stress: stopped the CPU hogs" in "".join(lines)
    assert "run 2 of 5" not in "".join(lines)
