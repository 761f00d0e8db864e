"""Hostile input to the apps of notebooks 2 and 3: readable messages, nothing lost, no NaN.

Headless: each test sets widget values or clicks buttons the way a reader (or code in a
notebook cell) would, then checks what the reader sees: the message, the fields, the toggle,
the figure and the batch or run on screen.

* The stepper's toggle from log-probabilities to probabilities refuses a log-probability whose
  probability float64 cannot hold faithfully, and the batch still loads afterwards; the other
  way is always faithful.
* A message about an entry stays short, whatever was typed.
* The stepper's methods name a bad argument and keep the step and batch (its constructor and
  public functions are rows of ``test_door.py``'s table).

The epochs explorer's hostile-input tests are in ``test_epochs.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import plain

from ppo_viz.numbers import exact, rounded
from ppo_viz.stepper import BatchStepper

#: Far longer than any message about an entry needs to be.
SHORT_MESSAGE = 600
HALF = np.log([0.5])


@pytest.fixture(scope="module")
def shared() -> BatchStepper:
    return BatchStepper()


@pytest.fixture
def stepper(shared: BatchStepper) -> BatchStepper:
    """The shared stepper, back on the worked example's first sample."""
    shared.load_preset("worked example")
    return shared


# --------------------------------------------------------------------------
# The stepper's toggle between log-probabilities and probabilities
# --------------------------------------------------------------------------


def in_log_mode(stepper: BatchStepper, new: str, old: str) -> None:
    """Switch the toggle to log-probabilities and type ``new`` and ``old``."""
    stepper.mode.value = "log-probabilities"
    stepper.new_field.value, stepper.old_field.value = new, old


@pytest.mark.parametrize(
    ("field", "logp", "why"),
    [
        ("new", -1000.0, "has no float64 probability: e^x is 0."),
        ("old", -745.2, "has no float64 probability: e^x is 0."),
        ("new", -744.0, "is too low: float64 holds e^x ≈ {} with fewer digits than the log has."),
        ("old", -715.0, "is too low: float64 holds e^x ≈ {} with fewer digits than the log has."),
    ],
)
def test_a_log_probability_without_a_faithful_probability_keeps_the_toggle_on_logs(
    stepper, field, logp, why
):
    typed = {"new": "-0.3, -0.5, -0.2, -0.1", "old": "-0.2, -0.4, -0.9, -0.1"}
    typed[field] = f"-0.3, -0.5, -0.2, {exact(logp)}"
    in_log_mode(stepper, typed["new"], typed["old"])
    stepper.mode.value = "probabilities"
    assert stepper.mode.value == "log-probabilities"
    assert stepper.new_field.description == "log π_new"
    assert (stepper.new_field.value, stepper.old_field.value) == (typed["new"], typed["old"])
    shown = plain(stepper.entry_message.value)
    probability = rounded(np.exp(np.array([logp]))[0], 2)  # numpy's exp, as the stepper's
    assert shown.startswith(f"log π_{field}, sample 3: “{exact(logp)}” {why.format(probability)}")
    assert shown.endswith("The fields stay as they were.")
    assert "ppo-message-error" in stepper.entry_message.value
    # Nothing was lost: the batch loads exactly as typed.
    assert stepper.load()
    loaded = {"new": stepper.batch.logp_new, "old": stepper.batch.logp_old}
    assert loaded[field][3] == logp
    assert "nan" not in plain(stepper.sample_view.value).lower()


def test_log_probabilities_whose_probabilities_hold_their_digits_still_switch(stepper):
    """e^-708.39 is a normal float64; e^-710 is not, but keeps more digits than -710 has."""
    assert np.exp(-708.39) >= np.finfo(float).tiny > np.exp(-710.0)
    in_log_mode(stepper, "-0.3, -708.39, -710", "-0.5, -0.5, -0.5")
    stepper.mode.value = "probabilities"
    assert stepper.mode.value == "probabilities"
    probabilities = np.exp(np.array([-0.3, -708.39, -710]))  # numpy's exp, as the stepper's
    assert stepper.new_field.value == ", ".join(exact(p) for p in probabilities)
    stepper.advantages_field.value = "1, -1, 1"
    assert stepper.load()
    np.testing.assert_allclose(stepper.batch.logp_new, [-0.3, -708.39, -710], rtol=1e-15)


def test_probabilities_to_log_probabilities_is_faithful_down_to_the_smallest_float(stepper):
    probabilities = [5e-324, 1e-310, 1e-300, 0.5, 1.0]
    typed = ", ".join(exact(p) for p in probabilities)
    stepper.new_field.value = typed
    stepper.old_field.value = "0.5, 0.5, 0.5, 0.5, 0.5"
    stepper.advantages_field.value = "1, -1, 1, -1, 0"
    assert stepper.load()
    as_probabilities = stepper.batch
    stepper.mode.value = "log-probabilities"
    assert stepper.new_field.value == ", ".join(exact(v) for v in np.log(probabilities))
    assert stepper.load()
    np.testing.assert_array_equal(stepper.batch.logp_new, as_probabilities.logp_new)
    np.testing.assert_array_equal(stepper.batch.logp_old, as_probabilities.logp_old)
    stepper.mode.value = "probabilities"  # the fields were not edited: they read as typed
    assert stepper.new_field.value == typed


# --------------------------------------------------------------------------
# The stepper's messages stay short
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "token", "quoted", "problem"),
    [
        ("new", "1" * 5000, "“11111111111111111111…” (5000 characters)", "is no finite number"),
        ("old", "0." + "5" * 4997 + "x", "“0.555555555555555555…” (5000 characters)", "is no"),
        ("advantages", "9" * 5000, "“99999999999999999999…” (5000 characters)", "is no finite"),
        ("eps", "-" + "2" * 4999, "“-2222222222222222222…” (5000 characters)", "is no finite"),
    ],
)
def test_a_5000_character_entry_is_shortened_in_the_message(stepper, field, token, quoted, problem):
    stepper.go(2)
    before = stepper.batch, stepper.step, stepper.sample_view.value
    if field == "eps":
        stepper.eps_field.value = token
    else:
        getattr(stepper, f"{field}_field").value = f"0.5, {token}, 0.5, 0.5"
    assert not stepper.load()
    shown = plain(stepper.entry_message.value)
    assert quoted in shown
    assert problem in shown
    assert token[:30] not in shown
    assert len(stepper.entry_message.value) < SHORT_MESSAGE
    assert (stepper.batch, stepper.step, stepper.sample_view.value) == before


def test_4096_bad_entries_are_counted_not_listed(stepper):
    bad = [f"x{t}" for t in range(4096)]
    stepper.new_field.value = ", ".join(bad)
    stepper.old_field.value = ", ".join(["2"] * 4096)
    stepper.advantages_field.value = ", ".join(["1e7"] * 4096)
    stepper.eps_field.value = ", ".join(bad)
    assert not stepper.load()
    lines = [plain(line) for line in stepper.entry_message.value.split("</div>") if line]
    assert lines == [
        "π_new, sample 0: “x0” is no finite number (such as -0.45). "
        "4095 more entries of π_new have a problem too.",
        "π_old, sample 0: “2” is not a probability in (0, 1] (0 has no log). "
        "4095 more entries of π_old have a problem too.",
        "A, sample 0: “1e7” is too large to plot: the stepper takes advantages up to ±1e6 "
        "(a million). 4095 more entries of A have a problem too.",
        "ε, sample 0: “x0” is no finite number (such as -0.45). "
        "4095 more entries of ε have a problem too.",
        "Still showing the last batch that loaded, worked example.",
    ]
    assert stepper.batch.name == "worked example"


# --------------------------------------------------------------------------
# The stepper's methods
# --------------------------------------------------------------------------


@pytest.mark.parametrize("step", [float("nan"), 1.5, "2", None, True])
def test_going_to_a_step_that_is_not_an_integer_names_it_and_keeps_the_step(stepper, step):
    stepper.go(2)
    with pytest.raises(TypeError, match="step must be an integer"):
        stepper.go(step)
    assert stepper.step == 2
    stepper.go(np.int64(3))
    assert stepper.step == 3


def test_a_preset_that_does_not_exist_is_named_and_nothing_changes(stepper):
    with pytest.raises(ValueError, match="a preset's name is one of"):
        stepper.load_preset("no such preset")
    assert stepper.batch.name == "worked example"
