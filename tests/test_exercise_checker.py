"""Notebook 6's checker beyond one mistake: pairs of mistakes, the evidence of a mismatch, and a
learner's function that loops, sleeps, swallows every exception, raises anything, prints a flood
or changes the process: it gets a finding within its time limit, never an exception or a frozen
kernel, and leaves the process as it was; a real Ctrl-C stops the check.
"""

from __future__ import annotations

import inspect
import itertools
import math
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_exercises import (
    KEY_OF,
    KINDS,
    LEARNERS,
    WRONG_IMPLEMENTATIONS,
    learner_clip_fraction,
    learner_loss,
    raising,
)

import ppo_clip
from ppo_viz.exercises import (
    TIME_LIMIT_S,
    battery,
    check,
    check_clip_fraction,
    check_grad,
    check_loss,
    exercise_summary,
    llm,
    sandbox,
)
from ppo_viz.exercises.mistakes import VALUE_MISTAKES
from ppo_viz.numbers import exact, rounded

#: Half of the rule: np.minimum(r, clip(r)) * A, the A < 0 branch forgotten, every r > 1 + eps
#: clipped whatever A's sign.
HALF_RULES = ("min_of_ratios", "no_negative_branch", "upper_sign_blind")
#: The forms of the clipping rule the learner code writes one at a time.
RULE_FORMS = {
    *HALF_RULES,
    *("unclipped", "clip_only", "max_for_min", "zero_advantage", "grad_on_clipped", "clip_swapped"),
}
#: Pairs whose answers on every batch equal those of one of the two mistakes alone, so no
#: checker could see both: the log-ratio is never exactly on an edge; the sign-blind count
#: ignores A; normalized advantages are never exactly 0.
INVISIBLE_TOGETHER = [
    {"no_exp", "non_strict"},
    {"sign_blind", "normalized"},
    {"zero_advantage", "normalized"},
    {"min_of_ratios", "normalized"},  # sign-blind too: only the advantages' signs move
    # With the log-ratio as the ratio nothing is above 1 + eps, where these rules differ.
    {"no_exp", "min_of_ratios"},
    {"no_exp", "no_negative_branch"},
    {"no_exp", "upper_sign_blind"},
    {"no_exp", "fixed_eps"},  # and the batches' log-ratios get one verdict under eps and 0.2
]
CODE_VARIANTS = {
    kind: [
        c for k, c, m, n in WRONG_IMPLEMENTATIONS if k == kind and m and m[0] in VALUE_MISTAKES[k]
    ]
    for kind in KINDS
}


#: Pairs where the learner code above lets one mistake override the other (its if/elif picks
#: one objective; with no clipping at all, how clipping is decided does not matter): only the
#: one that takes effect shows in the answers, and only it is named.
TAKES_EFFECT = {
    frozenset(pair): effect
    for pair, effect in [
        (("unclipped", "clip_only"), "unclipped"),
        (("unclipped", "max_for_min"), "unclipped"),
        (("unclipped", "clip_swapped"), "unclipped"),
        (("unclipped", "non_strict"), "unclipped"),
        (("unclipped", "fixed_eps"), "unclipped"),
        (("grad_on_clipped", "fixed_eps"), "unclipped"),
        (("clip_only", "max_for_min"), "clip_only"),
        (("grad_on_clipped", "non_strict"), "unclipped"),
        (("grad_on_clipped", "clip_only"), "unclipped"),
        (("grad_on_clipped", "max_for_min"), "unclipped"),
    ]
}


#: Pairs whose answers get a note on the robustness batches: a gradient of 0 on every batch
#: (the log-ratio never leaves the band, and clip-only zeroes it inside) reads as a placeholder.
NOTED = {("grad", frozenset({"no_exp", "clip_only"})): ("mismatch",)}


@pytest.mark.parametrize("kind", KINDS)
def test_every_visible_pair_of_mistakes_in_learner_code_is_named(kind):
    """Each pair, issue 14's mistakes (max_for_min, clip_swapped, ratio_inverted, no_exp,
    zero_advantage, unclipped, clip_only) with every other among them, each with evidence."""
    wrong = []
    for first, second in itertools.combinations(CODE_VARIANTS[kind], 2):
        keys = {KEY_OF.get(first, first), KEY_OF.get(second, second)}
        if len(keys) < 2 or keys in INVISIBLE_TOGETHER:
            continue
        keys = {TAKES_EFFECT.get(frozenset({first, second}))} - {None} or keys
        if {first, second} & {"sign_blind", "clipped_ratio_on_clipped"} or (
            "zero_advantage_else" in {first, second} and {first, second} & RULE_FORMS
        ):
            continue  # the learner code above does not combine these forms with others
        if {first, second} & set(HALF_RULES) and {first, second} <= RULE_FORMS:
            continue  # each is a whole rule of its own in the learner code above
        result = check(kind, LEARNERS[kind](first, second))
        named = (set(result.mistakes), result.note_keys, all(f.evidence for f in result.findings))
        if named != (keys, NOTED.get((kind, frozenset({first, second})), ()), True):
            wrong.append((first, second, named))
    assert not wrong, "\n".join(map(str, wrong))


def off_for_big_batches(logp_new, logp_old, advantages, eps=0.2):
    loss = ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)
    return loss + 0.001 if len(advantages) >= 5 else loss


def scaled_grad(logp_new, logp_old, advantages, eps=0.2):
    grad = ppo_clip.ppo_clip_grad(logp_new, logp_old, advantages, eps)
    return grad * np.where(np.arange(len(grad)) % 2 == 1, 1.5, 1.0)  # odd entries off


@pytest.mark.parametrize(
    ("kind", "function"), [("loss", off_for_big_batches), ("grad", scaled_grad)]
)
def test_a_mismatch_lists_each_sample_to_look_at_with_r_and_a(kind, function):
    """An unknown error falls back to the smallest failing batch, with its inputs and every sample
    with its r, A and the contract's verdict; for a gradient, each differing entry."""
    result = check(kind, function)
    assert result.mistakes == ("mismatch",), str(result)
    evidence = result.findings[0].evidence
    batch = next(b for b in battery("core") if b.label in evidence)
    breakdown, expected = batch.breakdown, batch.answers[kind]
    listed = [int(i) for i in re.findall(r"sample (\d+) \(r = ", evidence)]
    if kind == "loss":
        assert batch is min((b for b in battery("core") if b.n >= 5), key=lambda b: b.n)
        assert f"expected {rounded(expected)}, got {rounded(expected + 0.001)}" in evidence
        assert "logp_new = [" in evidence
        assert listed == list(range(batch.n))
    else:  # the first is the evidence's own sample
        assert listed[1:] == [i for i in range(1, batch.n, 2) if expected[i] != 0][:8]
    for i in listed:
        r, a = rounded(breakdown.ratio[i]), rounded(breakdown.advantages[i])
        verdict = (": clipped" if breakdown.is_clipped[i] else ": not clipped") * (kind == "loss")
        assert f"sample {i} (r = {r}, A = {a}){verdict}" in evidence


def test_a_tiny_difference_is_close_but_not_float64_and_shown_with_the_digits_that_differ():
    def nudged(logp_new, logp_old, advantages, eps=0.2):
        return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps) * (1 + 1e-8)

    result = check_loss(nudged)
    assert result.mistakes == ("precision",), str(result)
    evidence = result.findings[0].evidence
    assert "to about 7 significant digits" in evidence
    batch = next(b for b in battery("core") if b.label in evidence)
    expected = batch.answers["loss"]
    shown = re.search(r"expected (\S+), got (\S+)\.", evidence).groups()  # type: ignore[union-attr]
    assert shown[0] != shown[1], evidence  # 4 digits would show -0.5375 twice
    assert math.isclose(float(shown[0]), expected, rel_tol=1e-9), evidence
    assert math.isclose(float(shown[1]), expected * (1 + 1e-8), rel_tol=1e-9), evidence


def test_a_float32_clip_fraction_is_not_blamed_for_an_edge_its_rounding_decides():
    result = check_clip_fraction(learner_clip_fraction("float32_math"))
    assert result.mistakes in ((), ("precision",)), str(result)
    # Where this CPU's float32 exp flips an edge, the finding says so, not "0 digits agree".
    assert "about 0 significant digits" not in str(result)
    if result.mistakes and "significant digits" not in str(result):
        assert "moved a ratio to the other side of the band's edge" in str(result)


@pytest.mark.parametrize("check_function", [check_grad, llm.check_grpo_loss])
@pytest.mark.parametrize("limit", [0, -1.0, math.nan, math.inf, 1e7, True, "3"], ids=repr)
def test_a_time_limit_that_is_not_a_positive_number_up_to_a_day_is_refused_before_any_call(
    limit, check_function
):
    """1e7 s passed the check and then overflowed the wait for the first call."""
    calls = []
    with pytest.raises(ValueError, match=r"^time_limit_s must be a positive number"):
        check_function(lambda *args: calls.append(args), time_limit_s=limit)
    assert not calls


def test_html_is_escaped():
    def shouts(logp_new, logp_old, advantages, eps=0.2):
        print("<b>loud</b>")
        raise ValueError("<script>alert(1)</script>")

    page = check_loss(shouts)._repr_html_()
    assert "<script>" not in page
    assert "<b>loud" not in page
    assert "&lt;script&gt;" in page


# --------------------------------------------------------------------------
# The checker survives any learner: time limit, Ctrl-C, exceptions, output (issue 24, section 2)
# --------------------------------------------------------------------------

#: A short limit keeps these tests quick.
QUICK_LIMIT_S = 0.2
#: What a check may take beyond waiting for the learner: a fork, the diagnosis, a busy machine.
MARGIN_S = 1.0


def endless(logp_new, logp_old, advantages, eps=0.2):
    while True:
        pass


def sleeps(logp_new, logp_old, advantages, eps=0.2):
    time.sleep(600)


def swallows_everything(logp_new, logp_old, advantages, eps=0.2):
    while True:
        try:
            time.sleep(0.05)
            raise ValueError
        except:  # noqa: E722 - the learner's loop of issue 24
            continue


def ignores_signals(logp_new, logp_old, advantages, eps=0.2):
    for number in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)
    endless(logp_new, logp_old, advantages, eps)


def timed_check(function, **keywords) -> tuple[Any, float]:
    started = time.monotonic()
    result = check_loss(function, **keywords)
    return result, time.monotonic() - started


@pytest.mark.parametrize("function", [swallows_everything, endless, sleeps, ignores_signals])
def test_whatever_a_function_catches_it_is_stopped_at_its_limit(function):
    """A loop in Python, a sleep in C, issue 24's loop that catches every exception (it was still
    running at 15 s; whatever a function catches, in an except, a finally or a suppress, the
    child's timer ends it with os._exit, which none catches) and one that ignores the signals
    (the checker kills it after the grace period)."""
    result, seconds = timed_check(function, time_limit_s=QUICK_LIMIT_S)
    assert seconds < QUICK_LIMIT_S + sandbox.GRACE_S + MARGIN_S
    assert result.mistakes == ("timeout",)
    assert result.findings[0].message.startswith(
        f"On {battery()[0].label} your function did not return within {exact(QUICK_LIMIT_S)} s, "
        "the checker's time limit for one call."
    )
    assert "The checker stopped it" in result.findings[0].message
    if function is swallows_everything:  # where it was: the learner's own line
        assert "The checker stopped it (in swallows_everything, line " in result.findings[0].message
    assert f"It was not called on the {len(battery()) - 1} batches after that one." in str(result)
    assert not multiprocessing.active_children()


def test_the_time_limit_is_the_documented_one_by_default():
    for function in (check, check_loss, check_clip_fraction, check_grad, exercise_summary):
        default = inspect.signature(function).parameters["time_limit_s"].default
        assert default == TIME_LIMIT_S


def test_ctrl_c_stops_the_check_at_once():
    """A real SIGINT means "stop the check", not "your function raised KeyboardInterrupt"."""
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        check_loss(swallows_everything, time_limit_s=5.0)
    assert time.monotonic() - started < 0.3 + MARGIN_S
    assert not multiprocessing.active_children()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _state() -> dict[str, Any]:
    """What a check must leave as it found it."""
    return {
        "signal handlers": {n: signal.getsignal(n) for n in signal.valid_signals()},
        "streams": (sys.stdout, sys.stderr),
        "sys.modules": dict(sys.modules),
        "ppo_clip": dict(vars(ppo_clip)),
        "numpy": dict(vars(np)),
        "numpy error state": np.geterr(),
        "numpy print options": np.get_printoptions(),
        "warning filters": list(warnings.filters),
        "working directory": os.getcwd(),
    }


def changes_everything(logp_new, logp_old, advantages, eps=0.2):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_REAL, 0)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - a learner's careless line
    sys.modules.pop("ppo_clip", None)
    sys.modules["json"] = None
    ppo_clip.clip_breakdown = None
    np.mean = None
    np.seterr(all="raise")
    np.set_printoptions(precision=2)
    warnings.simplefilter("error")
    os.chdir(os.sep)
    return 0.0


@pytest.mark.parametrize("function", [changes_everything, endless])
def test_the_process_is_left_as_it_was_found(function):
    """Also someone else's SIGALRM handler and running timer (pytest-timeout uses both)."""
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
    signal.setitimer(signal.ITIMER_REAL, 30.0)
    try:
        before = _state()
        result = check_loss(function, time_limit_s=QUICK_LIMIT_S)
        after = _state()
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert result.findings
    for name, value in before.items():
        assert after[name] == value, name
    assert 25.0 < remaining <= 30.0
    assert not fired


def test_the_reference_answers_do_not_follow_a_replaced_module(monkeypatch):
    monkeypatch.setattr(ppo_clip, "ppo_clip_loss", learner_loss("sign"))
    monkeypatch.setattr(ppo_clip, "clip_breakdown", lambda *args, **kwargs: None)
    assert check_loss(ppo_clip.ppo_clip_loss).mistakes == ("sign",)
    assert check_loss(learner_loss()).passed


def test_outside_the_main_thread_a_function_is_stopped_too():
    results = []
    worker = threading.Thread(
        target=lambda: results.append(timed_check(swallows_everything, time_limit_s=QUICK_LIMIT_S))
    )
    worker.start()
    worker.join(QUICK_LIMIT_S + MARGIN_S)
    assert results, "the check did not return"
    result, _ = results[0]
    assert result.mistakes == ("timeout",)
    assert "The checker stopped it" in result.findings[0].message


def test_printed_output_is_captured_and_shortened(capfd):
    """From Python's streams and from file descriptors 1 and 2: ``os.write`` and a shell's
    output reached the notebook past the capture, once per batch."""

    def chatty(logp_new, logp_old, advantages, eps=0.2):
        print("x" * 200_000)
        os.write(1, b"one\n")
        os.write(2, b"two\n")
        os.system("echo shell")
        return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)

    result = check_loss(chatty)
    assert capfd.readouterr() == ("", "")
    assert result.passed
    calls, per_call = len(battery()), len("x" * 200_000 + "\none\ntwo\nshell\n")
    numbers = {str(per_call * calls), str(calls), str(sandbox.OUTPUT_LIMIT)}  # all, calls, cut
    assert numbers <= set(re.findall(r"\d+", result.printed))
    assert f"{'x' * 300!r}" in result.printed
    assert len(str(result)) < 2000


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie waiting for its parent does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_a_timeout_on_the_largest_batch_is_a_note_and_no_process_outlives_the_check(tmp_path):
    """A ``sleep 600`` started by the function, then a loop, outlived the check."""
    started = tmp_path / "pids"

    def starts_processes(logp_new, logp_old, advantages, eps=0.2):
        with started.open("a") as pids:
            print(subprocess.Popen(["sleep", "600"]).pid, file=pids)
        while len(advantages) > 1000:  # on the largest batch: never returns
            pass
        return ppo_clip.ppo_clip_loss(logp_new, logp_old, advantages, eps)

    result, seconds = timed_check(starts_processes, time_limit_s=QUICK_LIMIT_S)
    assert seconds < QUICK_LIMIT_S + MARGIN_S
    assert result.passed
    assert result.note_keys == ("timeout",)
    assert "batch '4096 tokens'" in result.notes[0].message
    pids = [int(pid) for pid in started.read_text().split()]
    assert len(pids) > 1  # calls that returned, and the one stopped
    deadline = time.monotonic() + MARGIN_S
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [pid for pid in pids if alive(pid)]


def test_the_summary_never_raises_and_keeps_to_the_time_limits():
    started = time.monotonic()
    summary = exercise_summary(
        endless, raising(KeyboardInterrupt), sleeps, time_limit_s=QUICK_LIMIT_S
    )
    assert time.monotonic() - started < 2 * QUICK_LIMIT_S + MARGIN_S
    text = str(summary)
    assert "Exercises passed (core batches): 0 of 3" in text
    assert text.count("Your function did not return in time") == 2
    assert "Your function raised an error" in text
    assert text.count("robustness: not checked (the check stopped at the time limit)") == 2
    with pytest.raises(TypeError, match="concept_questions"):
        exercise_summary(endless, endless, endless, [3])
