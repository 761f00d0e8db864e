"""Experiments whose committed results the notebooks show (see each module's docstring)."""
