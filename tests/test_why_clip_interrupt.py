"""Ctrl-C on the why-clip study stops it within seconds, its workers a cell's length from done,
and names only files that exist (issue 31: workers used to run their queued cells to the end).
That it keeps the cells that finished, and says how many: test_study_results.py's resume test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
#: Three CartPole cells of over 10 seconds each (two running, one queued) on two workers.
SLOW_SLICE = ["--setting", "cartpole", "--method", "ppo", "--method", "unclipped"]
SLOW_SLICE += ["--method", "clip_only", "--value", "0.005", "--cartpole-seeds", "8"]
SLOW_SLICE += ["--seed-set", "discovery", "--jobs", "2"]
#: How soon after Ctrl-C the command must have exited.
PROMPT_S = 5.0


def wait_for(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def named_paths(message: str) -> list[Path]:
    """The absolute paths a message names."""
    return [Path(word.rstrip(";:,.")) for word in message.split() if word.startswith("/")]


def test_ctrl_c_in_a_terminal_stops_the_study_within_seconds(tmp_path):
    """Ctrl-C reaches the whole process group, workers included; the command exits at once,
    with the interruption's status, and names no cache file that does not exist."""
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "experiments.why_clip", *SLOW_SLICE],
            cwd=REPOSITORY,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,  # its own process group, as a terminal's foreground job
            env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        )
    try:
        wait_for(lambda: "starting" in stderr.read_text(), timeout=60)
        time.sleep(1.5)  # the workers are inside their cells
        assert process.poll() is None, stderr.read_text()
        os.killpg(process.pid, signal.SIGINT)
        interrupted = time.monotonic()
        status = process.wait(timeout=120)
        took = time.monotonic() - interrupted
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    said = stderr.read_text()
    assert took < PROMPT_S, f"exited {took:.1f} s after Ctrl-C"
    assert status == 130, said
    assert "interrupted" in said
    for path in named_paths(said.split("interrupted", 1)[1]):
        assert path.exists(), f"the message names {path}, which does not exist"
    with pytest.raises(ProcessLookupError):  # no worker outlives the command
        os.killpg(process.pid, 0)
