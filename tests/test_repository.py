"""The repository stands alone: its contract page states the numbers the tests use, and no file
points outside the repository (a clone must hold everything its tests check)."""

from __future__ import annotations

import decimal
import math
import re
import subprocess
from decimal import Decimal
from pathlib import Path

import helpers
import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")


def _contract_line(name: str) -> str:
    """The text after ``name ->`` in the contract page's worked example."""
    match = re.search(rf"^\s*{name}\s*->\s*(.+)$", CONTRACT, flags=re.MULTILINE)
    assert match, f"docs/contract.md states no '{name} ->' line"
    return match.group(1)


def test_the_contract_page_states_the_numbers_the_tests_check() -> None:
    assert float(_contract_line("ppo_clip_loss")) == helpers.CONTRACT_LOSS
    assert float(_contract_line("clip_fraction")) == helpers.CONTRACT_CLIP_FRACTION
    grad = [float(x) for x in _contract_line("ppo_clip_grad").strip("[] ").split()]
    assert tuple(grad) == helpers.CONTRACT_GRAD


def test_the_contract_says_where_each_ratio_lies_and_what_one_ulp_does_to_the_loss() -> None:
    """Exact decimal arithmetic (``float(Decimal)`` rounds correctly) and float64 sums without
    ``exp``: what the machines section says of the worked example holds on every CPU."""
    with decimal.localcontext(prec=40):
        logs = [float(Decimal(p).ln()) for p in (0.7, 0.55, 0.3, 0.45, 0.5)]
        exact = [Decimal(x - logs[-1]).exp() for x in logs[:-1]]
        ratios = (1.4, 1.1, 0.6, 0.9)
        below = [
            (Decimal(r) - e) / Decimal(math.ulp(r)) for r, e in zip(ratios, exact, strict=True)
        ]
    text = " ".join(CONTRACT.split())
    assert f"{', '.join(f'{b:.2f}' for b in below[:-1])} and {below[-1]:.2f} ulp below" in text
    assert f"a correctly rounded `exp` gives `{[float(e) for e in exact]}`" in text
    terms = (1.2, 2 * math.nextafter(1.1, 0), -0.8, -0.5 * 0.9)  # sample 1 one ulp low
    assert f"`1.0999999999999999` would give `−{sum(terms) / 4!r}`" in text


def _tracked_text_files() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    suffixes = {".py", ".md", ".ipynb", ".js", ".j2", ".css", ".toml", ".txt", ".cfg", ""}
    return [ROOT / name for name in listed if Path(name).suffix in suffixes]


def test_no_file_refers_to_a_path_outside_the_repository() -> None:
    folder = "shared" + "/"  # spelled apart so this file does not match itself
    outside = re.compile(rf"\.\./{folder}|{folder}(SPEC|LLM_CLIP)\.md")
    offenders = [
        str(path.relative_to(ROOT))
        for path in _tracked_text_files()
        if path.is_file() and outside.search(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not offenders, f"these files cite a path outside the repository: {offenders}"
