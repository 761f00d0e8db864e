"""Headless tests of notebook 1's figure and sliders: what is drawn is the module's output."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import matplotlib
import nbformat
import numpy as np
import pytest
from helpers import assert_panel_draws, assert_states, log_landing_on, markdown_of
from matplotlib.figure import Figure
from PIL import Image

import ppo_clip
from ppo_viz.numbers import rounded
from ppo_viz.panels import draw_objective_panel, ratio_grid, set_fixed_limits
from ppo_viz.surrogate import ADVANTAGE_RANGE, RATIO_AXIS, SurrogateExplorer


@pytest.fixture
def explorer() -> SurrogateExplorer:
    return SurrogateExplorer()


def assert_jump_drawn(panel, advantage: float, eps: float) -> None:
    """The gradient's jump at the band's edge on the side ``advantage`` clips, on the module's
    values: a filled marker at exactly the edge, an open one just past it, a gap in the line."""
    edge = 1.0 + eps if advantage > 0 else 1.0 - eps
    log_edge = log_landing_on(edge)  # exp(log_edge) is exactly the edge, on any machine
    at_edge = ppo_clip.ppo_clip_grad([log_edge], [0.0], [advantage], eps)[0]
    # The filled marker is what ppo_clip_grad gives at exactly 1 ± eps: not clipped there.
    assert panel.jump_kept.get_xdata().tolist() == [edge]
    assert panel.jump_kept.get_ydata().tolist() == [at_edge]
    assert at_edge == -edge * advantage
    # The open marker is the value just past the edge: zero, the sample is clipped.
    past = np.nextafter(edge, 3.0 if advantage > 0 else 0.0)
    just_past = ppo_clip.ratio_sweep([past], advantage, eps).grad[0]
    assert panel.jump_other_side.get_xdata().tolist() == [edge]
    assert panel.jump_other_side.get_ydata().tolist() == [just_past] == [0.0]
    # The line itself has a gap there instead of a steep stretch.
    xs = panel.gradient.get_xdata()
    gap = np.flatnonzero(np.isnan(xs))
    assert len(gap) == 1
    assert edge in (xs[gap[0] - 1], xs[gap[0] + 1])


@pytest.mark.parametrize("eps", [0.0, 0.2, 0.3, 0.35, 1.0])
@pytest.mark.parametrize("advantage", ADVANTAGE_RANGE)
def test_sliders_redraw_the_modules_curves_band_titles_and_jumps(explorer, eps, advantage):
    """The shading starts at the first ratio the module clips; at eps = 1 no ratio is below
    1 - eps, so nothing is shaded, the A < 0 title says "never clipped" and no jump is drawn."""
    explorer.controls["eps"].value = eps
    explorer.controls["advantage"].value = advantage
    for sign in (+1, -1):
        assert_panel_draws(explorer.columns[sign], sign * advantage, eps)
    assert_jump_drawn(explorer.columns[+1], advantage, eps)
    positive, negative = (explorer.columns[s].zero_grad[0] for s in (+1, -1))
    grid = ratio_grid(eps, r_axis=RATIO_AXIS)
    assert grid[ppo_clip.ratio_sweep(grid, 1.0, eps).is_clipped].min() == positive.get_x()
    assert positive.get_x() == pytest.approx(1 + eps, abs=0.01)
    titles = [explorer.columns[s].objective_ax.get_title() for s in (+1, -1)]
    assert f"r > {1 + eps:.2f}" in titles[0]
    assert f"[{rounded(1 - eps, 3)}, {rounded(1 + eps, 3)}]" in explorer.readout.value
    if eps == 1.0:
        assert negative.get_width() == 0.0
        assert "never clipped" in titles[1]
        assert len(explorer.columns[-1].jump_kept.get_xdata()) == 0
        assert not np.isnan(explorer.columns[-1].gradient.get_xdata()).any()
    else:
        assert_jump_drawn(explorer.columns[-1], -advantage, eps)
        assert negative.get_x() < 0.0  # drawn past the axis' left end
        assert negative.get_x() + negative.get_width() == pytest.approx(1 - eps, abs=0.01)
        assert f"r < {1 - eps:.2f}" in titles[1]


def test_worked_example_points_show_each_samples_own_term_and_gradient(explorer):
    """Each point is its sample's term for its own advantage (N = 1), not the slider's |A|."""
    example = ppo_clip.clip_breakdown(*ppo_clip.worked_example())
    for sign, panel in explorer.columns.items():
        (chosen,) = np.nonzero(np.sign(example.advantages) == sign)
        xs, terms = panel.samples[0].get_data()
        _, grads = panel.samples[1].get_data()
        assert sorted(xs) == sorted(example.ratio[chosen])
        for x, term, grad in zip(xs, terms, grads, strict=True):
            t = chosen[list(example.ratio[chosen]).index(x)]
            one = ppo_clip.ratio_sweep([x], example.advantages[t], 0.2)
            assert (term, grad) == (one.objective_term[0], one.grad[0])
            assert term == pytest.approx(example.objective_term[t])  # sample 1's is 2.2, not 1.1
    explorer.controls["advantage"].value = 2.0  # the curve moves; the points stay the samples'
    xs, terms = explorer.columns[+1].samples[0].get_data()
    assert sorted(terms) == pytest.approx([1.2, 2.2])


def test_redraws_move_artists_without_stacking_or_moving_axes(explorer):
    figure = explorer.figure
    limits = [(ax.get_xlim(), ax.get_ylim()) for ax in figure.axes]
    line_count = sum(len(ax.lines) for ax in figure.axes)
    for eps in np.linspace(0, 1, 7):
        explorer.controls["eps"].value = float(eps)
    explorer.controls["advantage"].value = ADVANTAGE_RANGE[1]
    assert explorer.figure is figure
    assert [(ax.get_xlim(), ax.get_ylim()) for ax in figure.axes] == limits
    assert sum(len(ax.lines) for ax in figure.axes) == line_count


def test_presenter_can_hide_the_worked_example(explorer):
    explorer.controls["worked_example"].value = False
    for column in explorer.columns.values():
        assert len(column.samples[0].get_xdata()) == 0
    labels = [label.get_text() for column in explorer.sample_labels.values() for label in column]
    assert labels == ["", "", "", ""]
    explorer.controls["worked_example"].value = True
    assert len(explorer.columns[+1].samples[0].get_xdata()) == 2
    labels = [label.get_text() for label in explorer.sample_labels[+1]]
    assert "sample 0 (A = +1)" in labels


@pytest.mark.parametrize("r_axis", [(0.0, 3.0), (0.5, 2.0), (0.0, 4.0)])
def test_the_ratio_axis_is_one_setting(r_axis):
    """Notebook 1's ratio axis can change in one place: the curves span it, kinks included."""
    figure = Figure()
    top, bottom = figure.subplots(2, 1)
    panel = draw_objective_panel(top, bottom, r_axis=r_axis)
    set_fixed_limits(top, bottom, +1, reach=2.0, r_axis=r_axis)
    panel.update(1.0, 0.2)
    xs = panel.objective.get_xdata()
    assert (xs[0], xs[-1]) == r_axis
    assert {0.8, 1.0, 1.2} <= set(xs)
    assert top.get_xlim() == r_axis
    zero = panel.zero_grad[0]
    assert zero.get_x() == xs[xs > 1.2].min()  # the first clipped ratio: 1.2 itself is kept
    assert zero.get_x() + zero.get_width() > r_axis[1]


# --------------------------------------------------------------------------
# Claims notebook 1 makes about its own cells, checked on the same code
# --------------------------------------------------------------------------

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "01_clipped_surrogate.ipynb"


def _run_cell_containing(marker: str) -> dict:
    """Execute the notebook's code cell holding ``marker`` (figures drawn off screen)."""
    import matplotlib.pyplot as plt

    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    source = next(c.source for c in cells if c.cell_type == "code" and marker in c.source)
    from ppo_viz.style import COLORS, LINES

    namespace = {"np": np, "plt": plt, "ppo_clip": ppo_clip, "COLORS": COLORS, "LINES": LINES}
    with mock.patch.object(plt, "show", return_value=None):
        exec(source, namespace)
    plt.close("all")
    return namespace


def test_the_first_step_on_a_fresh_batch_is_the_policy_gradient():
    namespace = _run_cell_containing("first_step = ppo_clip.ppo_clip_grad")
    np.testing.assert_array_equal(namespace["first_step"], namespace["policy_gradient"])


def test_importance_weighting_is_unbiased_but_spreads_and_the_clip_stays_flat():
    namespace = _run_cell_containing("per_arm = ppo_clip.clip_breakdown")
    pi_old, advantage = namespace["pi_old"], namespace["advantage"]
    kl = np.array(namespace["kl"])
    unclipped = np.array(namespace["unclipped"])
    clipped = np.array(namespace["clipped"])
    truth = np.array(namespace["truth"])
    batches = unclipped.shape[1]
    # "The unclipped estimate follows the true value on average": within 4 standard errors.
    standard_error = unclipped.std(axis=1) / np.sqrt(batches)
    assert np.all(np.abs(unclipped.mean(axis=1) - truth) <= 4 * standard_error + 1e-12)
    # "its band widens fast": the 5-95 % width grows with the KL, several-fold over the range.
    low, high = np.percentile(unclipped, [5, 95], axis=1)
    width = high - low
    assert np.all(np.diff(kl) > 0)
    assert width[-1] > 4 * width[1]
    # "The PPO estimate stops rising once the KL reaches about ..., while the truth keeps
    # climbing": from the first step where the A > 0 arm's ratio is above 1 + eps and the A < 0
    # arm's below 1 - eps (the A = 0 arm adds nothing), every batch's estimate is the same number.
    assert np.ptp(clipped.mean(axis=1)) < 0.1 * np.ptp(truth)
    assert np.all(np.diff(truth) > 0)
    pi_new = np.array([np.exp(np.log(pi_old) + s * advantage) for s in np.linspace(0, 3, 31)])
    ratios = pi_new / pi_new.sum(axis=1, keepdims=True) / pi_old
    lower, upper = ppo_clip.clip_band(ppo_clip.DEFAULT_EPS)
    outside = (ratios[:, advantage > 0] > upper).all(axis=1)
    outside &= (ratios[:, advantage < 0] < lower).all(axis=1)
    first = int(np.argmax(outside))
    assert outside[first:].all()
    assert 0 < first <= 5  # early: within the first few of 31 steps
    np.testing.assert_allclose(clipped[first:], clipped[[first]].repeat(len(truth) - first, 0))
    # The prose says where on the figure's KL axis, and the clip size the cell used (the default).
    assert_states(
        markdown_of(NOTEBOOK),
        f"once the KL reaches about {kl[first]:.1g},",
        f"$\\epsilon = {ppo_clip.DEFAULT_EPS:g}$ (the next section draws it)",
    )


def test_the_legend_has_six_entries_one_per_objective_and_mark(explorer):
    """Few enough for a projector: each objective once (its line style is the same in both rows)."""
    labels = [text.get_text() for text in explorer.figure.legends[0].get_texts()]
    assert len(labels) == 6
    for formula in ("min(r·A, clip(r)·A)", "r·A, gradient −r·A", "clip(r)·A, gradient 0 outside"):
        assert sum(formula in label for label in labels) == 1


def test_the_readme_image_is_what_its_script_draws(tmp_path, monkeypatch):
    """The README's figure is what notebooks/images/readme_image.py draws, pixel for pixel.

    A mean difference below one level passed a stale image after PPO's curve changed colour
    (7,320 pixels, mean 0.39).  The same matplotlib draws the same pixels on any machine;
    another version may not, so the image records the version that drew it.
    """
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "notebooks" / "images" / "readme_image.py"
    spec = importlib.util.spec_from_file_location("readme_image", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    redraw = "redraw it: python notebooks/images/readme_image.py"
    committed_image = Image.open(module.IMAGE)
    drawn_by = committed_image.info.get("Software", "")
    assert f"version{matplotlib.__version__}," in drawn_by, (
        f"the README's image was drawn by {drawn_by!r}, this is {matplotlib.__version__}: {redraw}"
    )
    committed = np.asarray(committed_image.convert("RGB"), dtype=int)
    monkeypatch.setattr(module, "IMAGE", tmp_path / "fresh.png")
    fresh = np.asarray(Image.open(module.main()).convert("RGB"), dtype=int)
    assert fresh.shape == committed.shape, redraw
    differing = np.count_nonzero((fresh != committed).any(axis=2))
    assert differing == 0, f"{differing} pixels differ from what the script draws: {redraw}"
