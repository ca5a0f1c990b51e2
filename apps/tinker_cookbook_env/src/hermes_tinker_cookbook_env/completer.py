"""A tinker-cookbook ``TokenCompleter`` on our own sampler (the embedded llama.cpp model of a
:class:`hermes_rollouts.DrivenSession`): the prompt ids in, the sampled ids (end id included)
and the sampler's logprobs out, unchanged."""

from __future__ import annotations

import itertools
from typing import Any

from hermes_protocols import ConfigError, SamplingParams, TokenBackend
from hermes_rollouts import derive_seed

from hermes_tinker_cookbook_env.cookbook_import import TokenCompleter, TokensWithLogprobs

#: tinker's stop reasons for ours (tinker has no "tool_calls" nor "abort")
STOP_REASONS = {"stop": "stop", "length": "length", "tool_calls": "stop", "abort": "stop"}


class HermesTokenCompleter(TokenCompleter):  # type: ignore[misc]
    """Samples ``sampler`` with ``temperature`` and at most ``max_tokens`` per call; each call's
    seed is derived from ``seed`` and the call's number. It stops on the sampler's end ids:
    a stop condition naming other ids is refused. Every answer's logprobs are kept for
    :meth:`take_logprobs` (the environment's ledger records them)."""

    def __init__(
        self,
        sampler: TokenBackend,
        end_token_ids: frozenset[int],
        *,
        max_tokens: int,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> None:
        self._sampler = sampler
        self._end_ids = end_token_ids
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._seed = seed
        self._calls = itertools.count()
        self._logprobs: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[float, ...]] = {}

    async def __call__(
        self, model_input: Any, stop: list[str] | list[int], *, max_tokens: int | None = None
    ) -> Any:
        strings = tuple(s for s in stop if isinstance(s, str))
        foreign = {s for s in stop if isinstance(s, int)} - self._end_ids
        if foreign:
            raise ConfigError(
                f"stop ids {sorted(foreign)} are not end ids of the sampler "
                f"({sorted(self._end_ids)}); it stops only on those"
            )
        limit = self._max_tokens if max_tokens is None else min(max_tokens, self._max_tokens)
        prompt = tuple(model_input.to_ints())
        sampling = SamplingParams(
            temperature=self._temperature,
            max_tokens=limit,
            seed=derive_seed(self._seed, f"call/{next(self._calls)}"),
            stop=strings,
        )
        generation = await self._sampler.generate(prompt, sampling=sampling)
        self._logprobs[(prompt, generation.ids)] = generation.logprobs
        return TokensWithLogprobs(
            tokens=list(generation.ids),
            maybe_logprobs=list(generation.logprobs),
            stop_reason=STOP_REASONS[generation.finish_reason],
        )

    def take_logprobs(
        self, prompt: tuple[int, ...], action: tuple[int, ...]
    ) -> tuple[float, ...] | None:
        """The logprobs this completer sampled ``action`` with after ``prompt`` (once), or
        ``None`` when it did not sample it."""
        return self._logprobs.pop((prompt, action), None)
