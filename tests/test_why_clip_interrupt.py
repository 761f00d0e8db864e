"""Ctrl-C on the why-clip study stops it within seconds, keeps the cells that finished, and
names only files that exist (issue 31: workers used to run their queued cells to the end)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments import why_clip as command
from experiments.runner import interrupted_message, read_cache, run_cells
from experiments.study import Cell

REPOSITORY = Path(__file__).resolve().parents[1]
#: Three CartPole cells of a few seconds each (two running, one queued) on two workers.
SLOW_SLICE = ["--setting", "cartpole", "--method", "ppo", "--method", "unclipped"]
SLOW_SLICE += ["--method", "clip_only", "--value", "0.005", "--cartpole-seeds", "4"]
SLOW_SLICE += ["--seed-set", "discovery", "--jobs", "2"]
#: How soon after Ctrl-C the command must have exited.
PROMPT_S = 5.0

needs_fork = pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork",
    reason="the workers see the test's stand-in for a cell only when forked",
)


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


def quick_raw(cell: Cell) -> dict:
    """A stand-in for a cell that finishes at once (PPO), or one that runs for a minute."""
    if cell.method != "ppo":
        time.sleep(60)
    return {"score": [0.5] * cell.seeds, "cpu_seconds": 0.0}


@needs_fork
def test_an_interrupted_run_keeps_its_finished_cells_and_stops_its_workers(tmp_path):
    """Ctrl-C right after one cell finished (here: raised where the progress is shown): the
    run stops within seconds though two workers are a minute from done, the finished cell is
    in the cache, and no worker is left."""
    plan = command.FULL_PLAN.sliced(
        ["cartpole"], ["ppo", "unclipped", "clip_only"], [0.005], seed_sets=["discovery"]
    )
    cache = tmp_path / command.CACHE_NAME

    def ctrl_c(cell: Cell) -> None:
        raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_cells(plan.cells, cache, 3, quick_raw, progress=ctrl_c)
    assert time.monotonic() - started < PROMPT_S
    kept = [json.loads(key)["method"]["objective"] for key in read_cache(cache).done]
    assert kept == ["clipped"]
    assert multiprocessing.active_children() == []
    message = interrupted_message(cache)
    assert "1 cell finished so far kept in" in message
    assert str(cache) in message
