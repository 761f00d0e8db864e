"""Notebook 6 itself: the battery its checks run, the concept questions that ppo_clip decides,
the summary for a teacher, and the notebook, headless with its exercise bodies empty and filled
in.
"""

from __future__ import annotations

import ast
import html
import inspect
import math
import re
from typing import Any

import nbformat
import numpy as np
import pytest
from helpers import assert_states
from notebook_runner import execute_notebook, output_problems, printed_text, run_committed
from test_exercises import (
    CORE,
    KINDS,
    NOTEBOOK,
    ROBUST,
    learner_clip_fraction,
    learner_grad,
    textbook_loss,
    whole_numbers,
)

import ppo_clip
from ppo_viz.exercises import (
    TIME_LIMIT_S,
    ConceptQuestion,
    battery,
    check,
    concept_questions,
    exercise_summary,
)
from ppo_viz.exercises.advice import EXPLANATIONS, IN_EXERCISE
from ppo_viz.exercises.battery import (
    FUNCTION_NAMES,
    NUMERICS_NOTEBOOK,
    OVERFLOW_LESSON,
    TOKENS_LESSON,
    UNDERFLOW_LESSON,
    CheckBatch,
)
from ppo_viz.exercises.mistakes import TOLERANCES, predict
from ppo_viz.export import WIDGET_VIEW_MIME
from ppo_viz.numbers import exact, rounded, vector

# --------------------------------------------------------------------------
# The battery and the variants
# --------------------------------------------------------------------------


def test_battery_covers_the_contracts_edges():
    batches = {b.name: b for b in battery()}
    edge = batches["ratios exactly on the band's edges"]
    assert edge.breakdown.ratio[0] == 1.2, "numpy's exp lands on the edge, on any CPU"
    assert edge.breakdown.ratio[1] == 0.8
    assert not edge.breakdown.is_clipped.any()
    log_ratio = edge.logp_new - edge.logp_old
    ways = {
        "math.exp": np.array([math.exp(x) for x in log_ratio]),
        "divided probabilities": np.exp(edge.logp_new) / np.exp(edge.logp_old),
    }
    clipped_another_way = np.zeros(2, dtype=bool)
    for ratio in ways.values():  # sample 0 has A > 0 (edge 1.2), sample 1 has A < 0 (edge 0.8)
        clipped_another_way |= [ratio[0] > 1.2, ratio[1] < 0.8]
    assert (edge.undecided[:2] == clipped_another_way).all(), "either verdict where they differ"
    assert not any(b.undecided.any() for b in battery() if b is not edge)
    overflow = batches["A = 0 with an overflowing ratio"].breakdown
    assert np.isinf(overflow.ratio[0])
    assert overflow.advantages[0] == 0
    assert batches["A < 0 with an overflowing ratio"].answers["loss"] == np.inf
    zero = batches["advantages of exactly 0"].breakdown
    outside = (zero.advantages == 0) & zero.outside_band
    assert (zero.ratio[outside] > 1.2).sum() == 2
    assert (zero.ratio[outside] < 0.8).sum() == 1
    assert {b.eps for b in battery()} >= {0.0, 0.2, 1.0}
    assert min(b.n for b in battery()) == 1
    assert max(b.n for b in battery()) == 4096
    assert batches["advantages with a nonzero mean"].advantages.mean() == 4.0
    assert [b.name for b in battery() if b.read_only] == ["random batch"]
    assert len({b.name for b in battery()}) == len(battery())
    for batch in battery():
        assert 0 <= batch.eps <= 1
        for logp in (batch.logp_new, batch.logp_old):
            assert ((logp >= -1000) & (logp <= 0)).all(), batch.name


def test_either_verdict_is_accepted_on_an_undecided_sample():
    """Where another exp could put a ratio on the other side of an edge, both answers pass."""
    edge = next(b for b in battery() if b.name == "ratios exactly on the band's edges")
    batch = CheckBatch("copy", "", edge.arrays, edge.extras)
    batch.__dict__["undecided"] = np.array([True, True, False])  # as math.exp may make them
    fractions = sorted({float(v[0]) for v in predict(batch, "clip_fraction").values})
    assert fractions == [0.0, 1 / 3, 2 / 3]
    gradients = predict(batch, "grad").values
    for sample in (0, 1):
        entries = {float(v[sample]) for v in gradients}
        assert entries == {0.0, float(edge.answers["grad"][sample])}
    assert all(v[2] == edge.answers["grad"][2] for v in gradients)


def test_robustness_batches_are_float64s_edges_and_the_largest_batch():
    for batch in battery():
        edges = bool(np.isinf(batch.breakdown.ratio).any() or batch.underflows.any())
        assert (batch.role == "robustness") == (edges or batch.n > 1000), batch.name
        assert bool(batch.further) == (batch.role == "robustness")
    assert [b.role for b in battery()] == ["core"] * CORE + ["robustness"] * ROBUST
    assert battery("robustness")[2].further == UNDERFLOW_LESSON


def test_the_lessons_name_sections_of_the_numerics_notebook_as_they_are():
    numerics = [
        path
        for path in sorted(NOTEBOOK.parent.glob("*.ipynb"))
        if "Numerics and the RLHF setting" in nbformat.read(path, as_version=4).cells[0].source
    ]
    assert len(numerics) == 1
    assert f"notebook {int(numerics[0].name[:2])}" == NUMERICS_NOTEBOOK
    headings = {
        " ".join(line.lstrip("# ").replace("`", "").split())
        for cell in nbformat.read(numerics[0], as_version=4).cells
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if line.startswith("## ")
    }
    for lesson in (OVERFLOW_LESSON, UNDERFLOW_LESSON, TOKENS_LESSON):
        section, title = re.fullmatch(r"notebook \d+, section (\d+) \((.*)\)", lesson).groups()
        assert f"{section}. {title}" in headings, lesson


def test_the_clip_fractions_trl_story_is_where_its_finding_says():
    """A clip fraction counting r*A < clip(r)*A is told of notebook 2's TRL 0.16 story."""
    cited = re.search(r"notebook (\d+), ([^)]*)\)", IN_EXERCISE["max_for_min", "clip_fraction"][1])
    path = next(NOTEBOOK.parent.glob(f"{int(cited[1]):02d}_*.ipynb"))
    text = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
    assert_states(text, f"## {cited[2]}\n", "TRL 0.16", "rA < \\operatorname{clip}(r)A")


# --------------------------------------------------------------------------
# Concept questions
# --------------------------------------------------------------------------

ANSWERS = {"favourable": 0, "wrong_way": 1, "why_min": 2, "first_update": 0}
#: Where a sentence ends: a full stop, question or exclamation mark before a capital, or at the end.
SENTENCE_END = r"[.?!](?=\s+[A-Z]|$)"


@pytest.mark.parametrize("key", list(ANSWERS))
def test_the_right_option_is_explained_and_a_wrong_one_names_the_answer(key):
    question = concept_questions()[key]
    assert question.answer == ANSWERS[key]
    question.choose(question.answer)
    feedback = html.unescape(question.feedback.value)
    assert f"Right. {question.explanation}" in feedback
    assert question.right_first_time
    assert question.outcome == "right at the first try"
    question = concept_questions()[key]
    wrong = (question.answer + 1) % len(question.options)
    question.choice.value = wrong  # what a click does
    feedback = html.unescape(question.feedback.value)
    assert feedback.count("Not quite. ") == 1
    assert "Right." not in feedback
    assert f"The answer is {question.option_text(question.answer).rstrip('.')}." in feedback
    assert question.explanation in feedback
    assert not question.right_first_time
    assert question.outcome == "not yet right"
    question.choose(question.answer)
    assert question.outcome == "right after 2 tries"


def test_every_wrong_option_has_a_note_on_one_line_and_every_explanation_two_sentences():
    """A radio button's label does not wrap cleanly: a long one overlaps the next option."""
    explanations = {**EXPLANATIONS, **{key: text for key, (_, text) in IN_EXERCISE.items()}}
    for key, question in concept_questions().items():
        for index, option in enumerate(question.options):
            assert option.note or index == question.answer, option.label
            assert len(question.option_text(index)) <= 100, question.option_text(index)
        explanations[key] = question.explanation
    for key, text in explanations.items():
        assert len(re.findall(SENTENCE_END, text)) <= 2, (key, text)


@pytest.mark.parametrize(
    ("key", "ratio", "advantage"), [("favourable", 1.3, 2.0), ("wrong_way", 1.5, -1.0)]
)
def test_a_single_sample_question_quotes_the_modules_numbers(key, ratio, advantage):
    sample = ppo_clip.ratio_sweep([ratio], advantage)  # a batch of N = 1: no exp, no last bit
    question = concept_questions()[key]
    right = question.options[question.answer].label
    assert_states(right, rounded(sample.grad[0]))
    assert_states(
        question.explanation,
        f"r = {rounded(ratio)}",
        f"clip(r)*A = {rounded(sample.clipped_term[0])}",
        rounded(sample.grad[0]),
    )


def test_why_min_is_decided_by_the_clip_only_gradient():
    strayed = ppo_clip.ratio_sweep([0.5], 1.0)  # r = 0.5, A = +1, N = 1: no exp, no last bit
    clip_only = ppo_clip.objective_terms(strayed, "clip_only")[1]
    assert (clip_only[0], strayed.grad[0], strayed.is_clipped[0]) == (0.0, -0.5, False)
    question = concept_questions()["why_min"]
    assert question.options[question.answer].claims == {"clip_only_grad": 0.0, "is_clipped": False}
    assert_states(question.explanation, "-r*A/N = -0.5", "clip(0.5)*A = 0.8, gradient 0")


def test_the_first_update_is_the_policy_gradient_and_later_ones_are_not():
    example = ppo_clip.worked_example()
    n = len(example.advantages)
    fresh = ppo_clip.ppo_clip_grad(example.logp_old, example.logp_old, example.advantages)
    np.testing.assert_array_equal(fresh, -example.advantages / n)
    moved = ppo_clip.ppo_clip_grad(*example)
    assert_states(
        concept_questions()["first_update"].explanation,
        vector(-example.advantages / n, each=rounded),
        vector(moved, each=rounded),
    )


def test_no_text_says_every_epoch_starts_at_r_equal_one():
    """Only the first update on a freshly collected batch starts at r = 1."""
    texts = [
        text
        for question in concept_questions().values()
        for text in [question.prompt, question.explanation]
        + [part for option in question.options for part in (option.label, option.note)]
    ]
    texts += [*EXPLANATIONS.values(), *(text for _, text in IN_EXERCISE.values())]
    joined = " ".join(texts)
    assert "first update on a freshly collected batch" in joined
    for wrong in ("epoch starts", "every epoch", "of an epoch", "this epoch"):
        assert wrong not in joined


def test_a_question_needs_exactly_one_right_option():
    facts = {"is_clipped": True, "grad": 0.0}
    options = {"clipped": ({"is_clipped": True}, ""), "grad 0": ({"grad": 0.0}, "")}
    with pytest.raises(ValueError, match="exactly one right option"):
        ConceptQuestion("x", facts, "x", "?", options, "")
    yes_no = {"yes": ({"fact": True}, ""), "no {fact}": ({"fact": False}, "")}
    question = ConceptQuestion("y", {"fact": False}, "y", "?", yes_no, "")
    assert (question.answer, question.options[1].label) == (1, "no False")


def test_a_question_starts_unanswered_and_displays_as_html_where_widgets_do_not_run():
    question = concept_questions()["favourable"]
    bundle = question._repr_mimebundle_()
    assert WIDGET_VIEW_MIME in bundle
    page = bundle["text/html"]
    assert "A sample has A = +2 and ratio r = 1.3" in page
    assert "<li>(a) Clipped; the gradient is 0.</li>" in page
    assert "Show the answer" in page
    assert bundle["text/plain"].startswith("Concept question: A sample has A = +2")
    assert "RadioButtons" not in bundle["text/plain"]
    assert "ppo-quiz" in question._dom_classes  # the browser tests look for it
    assert question.choice.value is None
    assert question.outcome == "not answered"


# --------------------------------------------------------------------------
# The summary
# --------------------------------------------------------------------------


def test_summary_of_a_finished_notebook():
    questions = concept_questions()
    for key, question in questions.items():
        question.choose(question.answer if key != "wrong_way" else 0)
    questions["wrong_way"].choose(questions["wrong_way"].answer)
    functions = (textbook_loss, learner_clip_fraction("sign_blind"), learner_grad())
    text = exercise_summary(*functions, questions)
    results = loss, fraction, grad = [check(*row) for row in zip(KINDS, functions, strict=True)]
    assert [result.passed for result in results] == [True, False, True]
    assert (loss.note_keys, grad.matching_robustness) == (("nan_overflow",), ROBUST)
    lines = text.splitlines()
    assert whole_numbers(lines[1]) == [2, 3]  # passed, of three
    assert fraction.findings[0].title in text  # what the failed one needs
    for result in results:  # each line says how its exercise did, with the numbers
        said = "\n".join(line for line in lines if result.exercise in line)
        assert CORE in whole_numbers(said) or not result.passed
        assert all(note.title in text for note in result.notes)
    at = next(i for i, line in enumerate(lines) if grad.exercise in line)
    assert ROBUST in whole_numbers(lines[at + 1])  # the gradient's robustness line
    answered = next(line for line in lines if "Concept questions" in line)
    assert whole_numbers(answered) == [len(ANSWERS) - 1, len(ANSWERS)]  # right first, of all
    wrong_way = questions["wrong_way"]
    assert re.search(rf"{re.escape(wrong_way.title)}\s+{re.escape(wrong_way.outcome)}", text)
    assert whole_numbers(wrong_way.outcome) == [2]  # tries


def test_summary_with_empty_bodies():
    def empty(logp_new, logp_old, advantages, eps=0.2):
        raise NotImplementedError

    text = str(exercise_summary(empty, empty, empty))
    assert text.count("not implemented yet") == 3
    assert "robustness" not in text
    assert "Concept questions" not in text


# --------------------------------------------------------------------------
# The notebook
# --------------------------------------------------------------------------

#: The three exercises' functions, by name.
EXERCISE_NAMES = tuple(FUNCTION_NAMES.values())


def _notebook() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


def _exercise_cells(notebook) -> dict[str, Any]:
    cells = {}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        for name in EXERCISE_NAMES:
            if cell.source.lstrip().startswith(f"def {name}("):
                cells[name] = cell
    return cells


def test_exercise_cells_have_the_modules_signatures_and_empty_bodies():
    notebook = _notebook()
    cells = _exercise_cells(notebook)
    assert set(cells) == set(EXERCISE_NAMES)
    for name, cell in cells.items():
        function = ast.parse(cell.source).body[0]
        assert isinstance(function, ast.FunctionDef)
        params = [arg.arg for arg in function.args.args]
        signature = inspect.signature(getattr(ppo_clip, name))
        assert params == list(signature.parameters)
        assert ast.literal_eval(function.args.defaults[0]) == signature.parameters["eps"].default
        # Every stub is the same: a docstring, then `raise NotImplementedError`.
        assert len(function.body) == 2, f"{name}'s body is not empty"
        assert ast.unparse(function.body[1]) == "raise NotImplementedError"
        assert "replace the next line with your code" in cell.source
        following = notebook.cells[notebook.cells.index(cell) + 1]
        check_name = {"ppo_clip_loss": "check_loss", "clip_fraction": "check_clip_fraction"}
        assert following.source == f"{check_name.get(name, 'check_grad')}({name})"
    assert "exercise_summary(" in notebook.cells[-2].source


def test_the_notebook_shows_every_concept_question_once():
    shown = [
        match
        for cell in _notebook().cells
        if cell.cell_type == "code"
        for match in re.findall(r'^questions\["(\w+)"\]$', cell.source)
    ]
    assert sorted(shown) == sorted(concept_questions())


def _markdown(cell: int) -> str:
    """One markdown cell's text with every run of whitespace (line breaks too) as one space."""
    return " ".join(_notebook().cells[cell].source.split())


def test_the_introduction_states_the_battery_the_time_limit_and_the_tolerances():
    core, robust = battery("core"), battery("robustness")
    assert_states(
        _markdown(0),
        f"{len(core)} core batches",
        f"a batch of {max(b.n for b in core)} samples",
        f"{len(robust)} robustness batches",
        f"a batch of {max(b.n for b in robust)} samples",
        f"a time limit of {exact(TIME_LIMIT_S)} s",
        f"the section of {NUMERICS_NOTEBOOK}",
    )

    def power_of_ten(value: float) -> str:
        exponent = round(math.log10(value))
        assert value == 10.0**exponent
        return f"$10^{{{exponent}}}$"

    rtol, atol = TOLERANCES["float64"]
    close = TOLERANCES["precision"][0]
    assert_states(
        _markdown(0),
        f"relative tolerance of {power_of_ten(rtol)} and an absolute one of {power_of_ten(atol)}",
        f"within {power_of_ten(close)} relative",
    )


def test_the_worked_examples_answers_are_the_modules():
    example = ppo_clip.clip_breakdown(*ppo_clip.worked_example())
    first, second = np.flatnonzero(example.is_clipped)
    assert_states(
        _markdown(4),
        f"${vector(example.ratio, each=rounded)}$",
        f"${vector(example.advantages, each=rounded)}$",
        f"Samples {first} and {second}",
        f"${rounded(example.loss)}$",
        f"${rounded(example.clip_fraction)}$",
        f"${vector(example.grad, each=rounded)}$",
    )


def test_things_to_try_names_notebook_2s_disagreeing_preset_exactly():
    stepper = pytest.importorskip(
        "ppo_viz.stepper", reason="notebook 2's module does not import", exc_type=ImportError
    )
    label = stepper.PRESETS["two clip fractions"][0]
    example = ppo_clip.clip_breakdown(*ppo_clip.worked_example())
    assert example.clip_fraction == example.band_fraction
    agree = f"{rounded(example.clip_fraction)} and {rounded(example.band_fraction)}"
    assert_states(_markdown(-1), agree, f"“{label}” preset")


@pytest.mark.notebook
def test_notebook_runs_with_empty_bodies():
    notebook, _ = run_committed(NOTEBOOK)
    assert not output_problems(notebook)
    printed = printed_text(notebook)
    assert "Exercises passed (core batches): 0 of 3" in printed
    assert printed.count("not implemented yet") == 3
    shown = [
        output["data"].get("text/html", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type == "execute_result"
    ]
    assert sum(": not implemented yet." in page for page in shown) == 3
    quizzes = [page for page in shown if re.search(r'class="[^"]*\bppo-quiz\b', page)]
    assert len(quizzes) == len(ANSWERS)


@pytest.mark.notebook
def test_notebook_runs_clean_with_correct_bodies():
    """Each body the reference solution, ppo_clip's function (learner-style numpy bodies pass the
    same checks: the ``learner`` rows of :data:`CASES`)."""
    notebook = _notebook()
    for name, cell in _exercise_cells(notebook).items():
        head = cell.source.lstrip().splitlines()[0]  # the exercise's def line
        cell.source = f"{head}\n    return ppo_clip.{name}(logp_new, logp_old, advantages, eps)"
    execute_notebook(notebook)
    assert not output_problems(notebook)
    lines = printed_text(notebook).splitlines()
    passed = next(line for line in lines if "passed" in line and "of 3" in line)
    assert whole_numbers(passed) == [3, 3], lines
    assert [whole_numbers(line) for line in lines if "robustness" in line] == [[ROBUST]] * 3
