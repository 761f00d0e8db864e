"""Notebook 8, where the advantage comes from: :mod:`.study` (a partly trained CartPole agent,
one episode, continuations of its states, GAE(lambda) against a Monte Carlo reference, bias and
variance over lambda) and :mod:`.apps` (:class:`AdvantageExplorer`, gamma and lambda on
sliders, and the figures of the critic and of the value loss).
"""
