"""Small networks with hand-written backpropagation, and Adam, for many runs at once.

:class:`MLP` is a two-hidden-layer tanh network (CleanRL's CartPole agent uses
two of them: a policy over the two actions and a value network).  Every
array has a leading axis of *runs*: run ``i`` has its own weights, its own
inputs and its own gradients, and nothing mixes runs, so many seeds train
side by side in a few numpy calls.

Backpropagation is the chain rule written out layer by layer
(:meth:`MLP.backward`); the project's tests check it against finite
differences.  :class:`Adam` is PyTorch's ``torch.optim.Adam`` update, with
the global gradient-norm clipping of ``torch.nn.utils.clip_grad_norm_``
(:func:`clip_by_global_norm`) applied per run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def orthogonal(rng: np.random.Generator, n_in: int, n_out: int, gain: float) -> FloatArray:
    """An ``(n_in, n_out)`` matrix with orthonormal rows or columns, times ``gain``.

    The initialisation CleanRL uses (``torch.nn.init.orthogonal_``): the Q of
    a QR decomposition of a Gaussian matrix, with signs fixed so it is
    uniformly distributed.
    """
    tall = rng.standard_normal((max(n_in, n_out), min(n_in, n_out)))
    q, r = np.linalg.qr(tall)
    q *= np.sign(np.diag(r))
    return gain * (q if n_in >= n_out else q.T)


class MLP:
    """``x -> tanh(x W1 + b1) -> tanh(h W2 + b2) -> h W3 + b3``, one set of weights per run.

    ``params`` is ``[W1, b1, W2, b2, W3, b3]`` with shapes ``(runs, n_in, h)``,
    ``(runs, h)``, ... ; inputs have shape ``(runs, batch, n_in)``.
    """

    def __init__(self, params: list[FloatArray]) -> None:
        self.params = params

    @classmethod
    def initial(
        cls,
        rngs: Sequence[np.random.Generator],
        sizes: tuple[int, int, int, int],
        output_gain: float,
    ) -> MLP:
        """Orthogonal weights (gain sqrt(2), ``output_gain`` for the last layer), zero biases."""
        gains = (np.sqrt(2.0), np.sqrt(2.0), output_gain)
        params = []
        for n_in, n_out, gain in zip(sizes[:-1], sizes[1:], gains, strict=True):
            params.append(np.stack([orthogonal(rng, n_in, n_out, gain) for rng in rngs]))
            params.append(np.zeros((len(rngs), n_out)))
        return cls(params)

    def forward(self, inputs: FloatArray) -> tuple[FloatArray, list[FloatArray]]:
        """Outputs ``(runs, batch, n_out)``, and what the backward pass needs: the input and
        each hidden layer."""
        layers = [inputs]
        for weights, bias in zip(self.params[:-2:2], self.params[1:-2:2], strict=True):
            layers.append(np.tanh(layers[-1] @ weights + bias[:, None, :]))
        return layers[-1] @ self.params[-2] + self.params[-1][:, None, :], layers

    def __call__(self, inputs: FloatArray) -> FloatArray:
        return self.forward(inputs)[0]

    def backward(self, layers: list[FloatArray], d_outputs: FloatArray) -> list[FloatArray]:
        """``d loss / d params`` from ``d loss / d outputs``, in the order of :attr:`params`.

        For a linear layer ``y = x W + b``: ``dW = x^T dy``, ``db = sum of dy``
        over the batch, ``dx = dy W^T``; through ``tanh``: ``dz = dh * (1 - h^2)``.
        """
        grads, d_z = [], d_outputs
        for index in reversed(range(len(layers))):
            grads[:0] = [np.swapaxes(layers[index], 1, 2) @ d_z, d_z.sum(axis=1)]
            if index:  # into the hidden layer below, through its tanh
                d_z = (d_z @ np.swapaxes(self.params[2 * index], 1, 2)) * (1.0 - layers[index] ** 2)
        return grads


def clip_by_global_norm(grads: list[FloatArray], max_norm: float) -> list[FloatArray]:
    """Scale each run's gradients so their joint 2-norm is at most ``max_norm``.

    As ``torch.nn.utils.clip_grad_norm_``: the factor is
    ``min(1, max_norm / (norm + 1e-6))``, one per run.
    """
    squares = sum((g**2).reshape(len(g), -1).sum(axis=1) for g in grads)
    factor = np.minimum(1.0, max_norm / (np.sqrt(squares) + 1e-6))
    return [g * factor.reshape((-1,) + (1,) * (g.ndim - 1)) for g in grads]


class Adam:
    """``torch.optim.Adam`` over a list of parameter arrays (updated in place), one per run.

    ``step(grads, learning_rate)`` applies one update; the learning rate can
    change between steps (CleanRL anneals it linearly to 0).  Each run counts its
    own steps: a run left out of a step (``active``) keeps its parameters and
    moments, as if the step had not happened for it.
    """

    def __init__(
        self,
        params: list[FloatArray],
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-5,
    ) -> None:
        self.params = params
        self.betas = betas
        self.eps = eps
        self.first = [np.zeros_like(p) for p in params]
        self.second = [np.zeros_like(p) for p in params]
        self.steps = np.zeros(len(params[0]), dtype=np.int64)

    def step(
        self, grads: list[FloatArray], learning_rate: float, active: NDArray[np.bool_] | None = None
    ) -> None:
        """One update: ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``, for
        the runs in ``active`` (default: all)."""
        beta1, beta2 = self.betas
        active = np.ones(len(self.steps), dtype=bool) if active is None else active
        self.steps += active
        taken = np.maximum(self.steps, 1)
        correction1 = 1.0 - beta1**taken
        correction2 = np.sqrt(1.0 - beta2**taken)
        for param, grad, m, v in zip(self.params, grads, self.first, self.second, strict=True):
            per_run = (-1,) + (1,) * (param.ndim - 1)
            keep = active.reshape(per_run)
            m[...] = np.where(keep, beta1 * m + (1.0 - beta1) * grad, m)
            v[...] = np.where(keep, beta2 * v + (1.0 - beta2) * grad**2, v)
            denominator = np.sqrt(v) / correction2.reshape(per_run) + self.eps
            update = (learning_rate / correction1.reshape(per_run)) * m / denominator
            param -= np.where(keep, update, 0.0)
