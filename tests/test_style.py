"""The repository is ruff clean, and ruff formatted, with the configuration it carries."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command", [["check"], ["format", "--check"]], ids=["ruff-check", "ruff-format"]
)
def test_ruff_is_clean(command: list[str]) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.fail("ruff is not installed; it is in requirements-test.txt")
    result = subprocess.run(
        [ruff, *command, "--no-cache", str(ROOT)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
