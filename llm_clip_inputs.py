"""The input checks of :mod:`llm_clip`: every message names the argument and the problem.

Kept apart from the math so that ``llm_clip.py`` reads like the formulas, as
:mod:`ppo_clip_inputs` is for :mod:`ppo_clip`, whose reading of an array
(:func:`ppo_clip_inputs.real_array`, :func:`ppo_clip_inputs.float64_of`) and of single numbers
is used here too, with the same messages.
:func:`checked_batch` returns the inputs as the math needs them, a :class:`Batch` of (B, T)
float64 arrays with 0 on padding, or raises ``TypeError`` (not an array of real numbers) or
``ValueError`` (a wrong shape, a value out of range, a NaN or infinity among the unmasked
entries).  Padding (mask False) is never read.  Finite inputs
further apart than float64 reaches give a difference of ``+-inf``, as in :mod:`ppo_clip`.
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from ppo_clip_inputs import (
    checked_count,
    checked_eps,
    checked_finite_vector,
    checked_real,
    float64_of,
    real_array,
)

__all__ = ["NO_ADVANTAGES", "Batch", "checked_batch"]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]

#: Passed for ``advantages`` by the functions that take none (a user's None is refused).
NO_ADVANTAGES = object()
#: The largest ``max_len``: a denominator B * max_len stays an exact float64.
LARGEST_MAX_LEN = 10**12


class Batch(NamedTuple):
    """Checked inputs: (B, T) float64 arrays that are 0 on padding, and the settings."""

    objective: str
    mask: BoolArray
    lengths: IntArray  # n_i, the tokens of each response
    log_ratio: FloatArray  # logp_new - logp_old (+-inf beyond float64)
    logp_new: FloatArray
    logp_old: FloatArray
    advantages: FloatArray  # broadcast to (B, T)
    ref_gap: FloatArray  # d = logp_ref - logp_new (0 without logp_ref)
    eps_low: float  # GMPO's band on log r: [-eps_low, eps_high]
    eps_high: float
    lower: float  # 1 - eps_low
    upper: float  # 1 + eps_high
    aggregation: str
    denominator: IntArray  # (B,): each token of response i weighs 1 / denominator[i]
    kl_coef: float
    tau_pos: float  # SAPO's temperatures (unused by the others)
    tau_neg: float
    rollout_weight: FloatArray | None = None  # (B, T): rollout_weights times keep; None: all 1


def checked_batch(
    logp_new: object,
    logp_old: object,
    advantages: object,
    mask: object,
    *,
    objective: str = "",
    per_response: bool = False,
    log_band: bool = False,
    eps_low: object = 0.0,
    eps_high: object = 0.0,
    aggregation: str = "token-mean",
    max_len: object = None,
    logp_ref: object = None,
    kl_coef: object = 0.0,
    tau: tuple[object, object] = (1.0, 1.0),
    rollout_weights: object = None,
    keep: object = None,
    names: tuple[str, str] = ("logp_new", "logp_old"),
) -> Batch:
    """Check every input (``objective`` and ``aggregation`` are already valid names; the
    defaults are those of a function with no band, KL or aggregation of its own).

    ``advantages=NO_ADVANTAGES`` means all 0 (for the functions that take none).  With
    ``per_response`` (GSPO, GMPO) a (B, T) array must be constant on each response's tokens.
    ``eps_low`` is in [0, 1] (the ratio's floor ``1 - eps_low`` is not negative), or any number
    >= 0 with ``log_band`` (GMPO's band on ``log r``, ``[-eps_low, eps_high]``).
    ``tau``: SAPO's ``(tau_pos, tau_neg)``, each positive with ``4 / tau`` finite.
    ``rollout_weights``: (B, 1) or (B, T), finite and at least 0 on unmasked tokens; ``keep``:
    (B,) booleans (or 0 and 1).  ``names``: what the messages call ``logp_new`` and
    ``logp_old`` (the rollout functions pass other arrays in their places).
    """
    low = checked_real("eps_low", eps_low) if log_band else checked_eps("eps_low", eps_low)
    high = checked_real("eps_high", eps_high)
    for name, eps in (("eps_low", low), ("eps_high", high)):
        if eps < 0:
            raise ValueError(f"{name} must be at least 0, got {eps!r}")
    taus = [checked_real(name, t) for name, t in zip(("tau_pos", "tau_neg"), tau, strict=True)]
    for name, t in zip(("tau_pos", "tau_neg"), taus, strict=True):
        if not t > 4 / sys.float_info.max:  # the gate's height 4 / tau is then finite
            raise ValueError(f"{name} must be positive (with 4/{name} finite), got {t!r}")
    coef = checked_real("kl_coef", kl_coef)
    if coef < 0:
        raise ValueError(f"kl_coef must be at least 0, got {coef!r}")
    if coef and logp_ref is None:
        raise ValueError(f"kl_coef is {coef!r} but logp_ref is None: pass the reference's logp")
    new_name, old_name = names
    new = real_array(new_name, logp_new, 2, "(B, T)")
    boolean = _checked_mask(mask, new.shape, new_name)
    new = _unmasked_finite(new_name, new, boolean, new_name)
    old = real_array(old_name, logp_old, 2, "(B, T)")
    old = _unmasked_finite(old_name, old, boolean, new_name)
    ref = new
    if logp_ref is not None:
        ref = _unmasked_finite("logp_ref", real_array("logp_ref", logp_ref, 2, "(B, T)"), boolean)
    with np.errstate(over="ignore"):  # finite inputs further apart than float64 reaches: +-inf
        log_ratio, gap = new - old, ref - new
    a = np.zeros_like(new)
    if advantages is not NO_ADVANTAGES:
        a = _checked_advantages(advantages, boolean)
    if per_response:
        _require_one_advantage_per_response(a, boolean, objective)
    lengths = boolean.sum(axis=1)
    count = len(lengths)
    if aggregation == "token-mean":
        denominator = np.full(count, lengths.sum())
    elif aggregation == "seq-mean-token-mean":
        denominator = count * lengths
    elif max_len is None:
        raise ValueError(f"max_len is required by the {aggregation} aggregation")
    else:
        longest = _checked_max_len(max_len, lengths)
        denominator = np.full(count, count * longest)
    weight = _checked_rollout_weight(rollout_weights, keep, boolean)
    return Batch(
        objective, boolean, lengths, log_ratio, new, old, a, gap, low, high, 1.0 - low, 1.0 + high,
        aggregation, denominator, coef, *taus, weight,
    )  # fmt: skip


def _checked_mask(value: object, shape: tuple[int, ...], new_name: str = "logp_new") -> BoolArray:
    """A boolean (or 0/1) array of logp_new's shape in which every response has a token."""
    mask = _flags("mask", value, 2)
    if mask.shape != shape:
        raise ValueError(f"mask has shape {mask.shape}; it must match {new_name}'s {shape}")
    empty = ~mask.any(axis=1)
    if empty.any():
        raise ValueError(f"mask[{int(np.argmax(empty))}] has no token; every response needs one")
    return mask


def _flags(name: str, value: object, ndim: int) -> BoolArray:
    """A boolean (or 0/1) array of ``ndim`` dimensions, as booleans."""
    array = real_array(name, value, ndim, "(B, T)" if ndim == 2 else "(B,)", booleans=True)
    if array.dtype != bool and not np.isin(array, (0, 1)).all():
        raise ValueError(f"{name} must hold booleans (or 0 and 1 only)")
    return array == 1


def _checked_rollout_weight(weights: object, keep: object, mask: BoolArray) -> FloatArray | None:
    """``rollout_weights`` ((B, 1) or (B, T)) times ``keep`` ((B,)) as (B, T), 0 on padding;
    None where neither is given."""
    if weights is None and keep is None:
        return None
    weight = np.ones(mask.shape)
    if weights is not None:
        array = real_array("rollout_weights", weights, 2, "(B, 1) or (B, T)")
        if array.shape not in ((len(mask), 1), mask.shape):
            raise ValueError(
                f"rollout_weights has shape {array.shape}; it must be "
                f"({len(mask)}, 1) or {mask.shape}"
            )
        weight = np.broadcast_to(array, mask.shape)
        if (mask & np.isposinf(weight)).any():  # rollout_weights(..., clip_max=None) overflowed
            i, t = np.argwhere(mask & np.isposinf(weight))[0]
            raise ValueError(
                f"rollout_weights[{i}, {t}] is inf; weights must be finite: bound them with "
                "clip_max"
            )
        weight = _unmasked_finite("rollout_weights", weight, mask)
        negative = mask & (weight < 0)
        if negative.any():
            i, t = np.argwhere(negative)[0]
            raise ValueError(f"rollout_weights[{i}, {t}] is {weight[i, t]!s}; weights must be >= 0")
    if keep is not None:
        kept = _flags("keep", keep, 1)
        if kept.shape != (len(mask),):
            raise ValueError(
                f"keep has shape {kept.shape}; it must be ({len(mask)},), one per response"
            )
        weight = weight * kept[:, None]
    return np.where(mask, weight, 0.0)


def _unmasked_finite(
    name: str, array: np.ndarray, mask: BoolArray, new_name: str = "logp_new"
) -> FloatArray:
    """``array`` as float64 with its padding set to 0, after checking its unmasked entries."""
    if array.shape != mask.shape:
        raise ValueError(f"{name} has shape {array.shape}; it must match {new_name}'s {mask.shape}")
    return np.where(mask, float64_of(name, array, mask, why="unmasked values"), 0.0)


def _checked_advantages(value: object, mask: BoolArray) -> FloatArray:
    """(B,), broadcast to each response's tokens, or (B, T); 0 on padding."""
    try:
        one_per_response = np.ndim(value) == 1
    except (TypeError, ValueError):  # ragged: refused below
        one_per_response = False
    if one_per_response:
        per_response = checked_finite_vector("advantages", value)
        if len(per_response) != len(mask):
            raise ValueError(
                f"advantages has {len(per_response)} entries for {len(mask)} responses"
            )
        return np.where(mask, per_response[:, None], 0.0)
    array = real_array("advantages", value, 2, "(B,), (B, 1) or (B, T)")
    if array.shape == (len(mask), 1):  # one per response, as TRL's advantages[:, None]
        array = np.broadcast_to(array, mask.shape)
    return _unmasked_finite("advantages", array, mask)


def _checked_max_len(value: object, lengths: IntArray) -> int:
    """Dr. GRPO's ``max_len``, a whole number no response is longer than (a shorter one would
    inflate its responses' weight ``n_i / max_len`` past 1)."""
    max_len = checked_count("max_len", value, LARGEST_MAX_LEN)
    if max_len < lengths.max():
        i = int(np.argmax(lengths))
        raise ValueError(
            f"max_len is {max_len} but response {i} has {lengths[i]} tokens; max_len must be at "
            "least the longest response"
        )
    return max_len


def _require_one_advantage_per_response(
    advantages: FloatArray, mask: BoolArray, objective: str
) -> None:
    first = advantages[np.arange(len(mask)), np.argmax(mask, axis=1)]
    differs = (mask & (advantages != first[:, None])).any(axis=1)
    if differs.any():
        raise ValueError(
            f"advantages[{int(np.argmax(differs))}] differs between tokens; {objective} needs one "
            "advantage per response"
        )
