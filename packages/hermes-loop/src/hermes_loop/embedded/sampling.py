"""Token sampling from raw logits with numpy: temperature, top-k, top-p and a seed.

The reported logprob of a sampled token follows ``SamplingParams.logprob_mode``:

* ``"sampled"`` (default): under the distribution the token was drawn from: logits divided by
  the temperature, truncated to top-k and top-p, renormalized. Greedy decoding (temperature 0
  or top-k 1) draws from a point mass, so its logprob is ``0.0``. This is the behaviour
  policy an importance ratio needs.
* ``"raw"``: under the model's unmodified distribution, ``log_softmax(logits)`` at temperature
  1 with no truncation (what a trainer recomputes from the same ids without the sampler).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from hermes_protocols import ConfigError, SamplingParams

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]

#: how many of the best tokens are examined before falling back to a full sort for top-p
_NUCLEUS_PROBE = 256


def log_softmax(logits: FloatArray) -> npt.NDArray[np.float64]:
    """``log_softmax`` over the last axis in float64."""
    x = logits.astype(np.float64)
    x -= x.max(axis=-1, keepdims=True)
    x -= np.log(np.exp(x).sum(axis=-1, keepdims=True))
    return x


def token_logprob(logits: FloatArray, token: int) -> float:
    """``log_softmax(logits)[token]`` without materialising the whole log-softmax."""
    top = float(logits.max())
    total = float(np.exp(logits - top).sum(dtype=np.float64))
    return float(logits[token]) - top - math.log(total)


def check_sampling(params: SamplingParams) -> None:
    """Raise :class:`ConfigError` for parameters no sampler could honour."""
    if not params.temperature >= 0.0:
        raise ConfigError(f"temperature must be >= 0, got {params.temperature}")
    if not 0.0 < params.top_p <= 1.0:
        raise ConfigError(f"top_p must be in (0, 1], got {params.top_p}")
    if params.top_k < 0:
        raise ConfigError(f"top_k must be >= 0 (0 = off), got {params.top_k}")
    if params.max_tokens < 1:
        raise ConfigError(f"max_tokens must be >= 1, got {params.max_tokens}")
    if params.logprob_mode not in ("sampled", "raw"):
        raise ConfigError(f"logprob_mode must be 'sampled' or 'raw', got {params.logprob_mode!r}")


class TokenSampler:
    """Draws tokens for one generation; the seed fixes the whole sequence of draws."""

    def __init__(self, params: SamplingParams) -> None:
        check_sampling(params)
        self.params = params
        self._rng = np.random.default_rng(params.seed)

    def sample(self, logits: FloatArray) -> tuple[int, float]:
        """Return ``(token, logprob)``, the logprob in the sampler's ``logprob_mode``."""
        token, sampled = self._draw(logits)
        if self.params.logprob_mode == "raw":
            return token, token_logprob(logits, token)
        return token, sampled

    def choose(self, logits: FloatArray) -> int:
        return self._draw(logits)[0]

    def _draw(self, logits: FloatArray) -> tuple[int, float]:
        """The drawn token and its logprob under the distribution it was drawn from."""
        params = self.params
        if params.temperature == 0.0 or params.top_k == 1:
            return int(np.argmax(logits)), 0.0
        ids, weights = self._candidates(logits)
        cumulative = np.cumsum(weights, dtype=np.float64)
        draw = self._rng.random() * cumulative[-1]
        index = min(int(np.searchsorted(cumulative, draw, side="right")), len(cumulative) - 1)
        logprob = math.log(float(weights[index])) - math.log(float(cumulative[-1]))
        return (index if ids is None else int(ids[index])), logprob

    def _candidates(self, logits: FloatArray) -> tuple[IntArray | None, npt.NDArray[np.float64]]:
        """Candidate ids (``None`` = the whole vocabulary, in id order) and unnormalised weights."""
        params = self.params
        ids: IntArray | None = None
        values = logits
        if 0 < params.top_k < len(logits):
            ids = np.argpartition(logits, -params.top_k)[-params.top_k :].astype(np.int64)
            values = logits[ids]
        scaled = (values.astype(np.float64) - float(values.max())) / params.temperature
        weights = np.exp(scaled)
        if params.top_p >= 1.0:
            return ids, weights
        return self._nucleus(ids, scaled, weights, params.top_p)

    @staticmethod
    def _nucleus(
        ids: IntArray | None,
        scaled: npt.NDArray[np.float64],
        weights: npt.NDArray[np.float64],
        top_p: float,
    ) -> tuple[IntArray, npt.NDArray[np.float64]]:
        """Keep the smallest set of most likely candidates whose mass reaches ``top_p``,
        ranked by their scaled logits (``weights`` can tie where the logits do not)."""
        total = float(weights.sum())
        order: IntArray
        if len(weights) > _NUCLEUS_PROBE:
            probe = np.argpartition(scaled, -_NUCLEUS_PROBE)[-_NUCLEUS_PROBE:]
            if float(weights[probe].sum()) >= top_p * total:
                order = probe[np.argsort(-scaled[probe], kind="stable")].astype(np.int64)
            else:
                order = np.argsort(-scaled, kind="stable").astype(np.int64)
        else:
            order = np.argsort(-scaled, kind="stable").astype(np.int64)
        sorted_weights = weights[order]
        cumulative = np.cumsum(sorted_weights)
        keep = min(int(np.searchsorted(cumulative, top_p * total, side="left")) + 1, len(order))
        chosen = order[:keep]
        return (ids[chosen] if ids is not None else chosen), sorted_weights[:keep]
