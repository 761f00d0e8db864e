"""Draw the README's figure: notebook 1's figure at its default settings.

From the repository root::

    python notebooks/images/readme_image.py

writes ``notebooks/images/clipped_objective.png`` with the colours, line styles and names of
``ppo_viz.style``, so a change there reaches the README's image too.
"""

from __future__ import annotations

from pathlib import Path

from ppo_viz.surrogate import SurrogateExplorer

IMAGE = Path(__file__).with_name("clipped_objective.png")


def main() -> Path:
    """Write the README's image and return its path."""
    IMAGE.write_bytes(SurrogateExplorer().png())
    return IMAGE


if __name__ == "__main__":
    print(f"wrote {main()}")
