"""The repository stands alone: its contract page states the numbers the tests use, and no file
points outside the repository (a clone must hold everything its tests check)."""

from __future__ import annotations

import re
import subprocess
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
