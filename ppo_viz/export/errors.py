"""What can stop an export, each with a message that says what is wrong."""

from __future__ import annotations


class ExportError(RuntimeError):
    """A notebook cannot be published as a static page (the message says why)."""


class SetupError(ExportError):
    """Found before any notebook runs: a bad output folder, no notebooks, no MathJax.

    The message is one line, fit to print after ``error:``.
    """
