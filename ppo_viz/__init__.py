"""Plotting and widget helpers for the PPO clipping notebooks.

All the math comes from :mod:`ppo_clip`; this package only draws it and wires
it to controls.  One submodule per notebook, plus the shared :mod:`.style` and
:mod:`.display`.
"""
