"""A tinker-cookbook ``TokenCompleter`` on our own sampler (the embedded llama.cpp model of a
:class:`hermes_rollouts.DrivenSession`): the prompt ids in, the sampled ids (end id included)
and the sampler's logprobs out, unchanged."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import attrs
from hermes_protocols import ConfigError, SamplingParams, TokenBackend
from hermes_rollouts import derive_seed

from hermes_tinker_cookbook_env.cookbook_import import TokenCompleter, TokensWithLogprobs

#: tinker's stop reasons for ours (tinker has no "tool_calls" nor "abort")
STOP_REASONS = {"stop": "stop", "length": "length", "tool_calls": "stop", "abort": "stop"}


@attrs.define(eq=False)
class HermesTokenCompleter(TokenCompleter):  # type: ignore[misc]
    """Samples ``sampler`` with ``temperature`` and at most ``max_tokens`` per call; each call's
    seed is derived from ``seed`` and the call's number. It stops on the sampler's end ids
    (``end_ids``): a stop condition naming other ids is refused. Every answer's logprobs are
    kept for :meth:`take_logprobs` (the environment's ledger records them)."""

    sampler: TokenBackend
    end_ids: frozenset[int]
    max_tokens: int = attrs.field(kw_only=True)
    temperature: float = attrs.field(default=1.0, kw_only=True)
    seed: int = attrs.field(default=0, kw_only=True)
    _calls: Iterator[int] = attrs.field(factory=itertools.count, init=False)
    _logprobs: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[float, ...]] = attrs.field(
        factory=dict, init=False
    )

    async def __call__(
        self, model_input: Any, stop: list[str] | list[int], *, max_tokens: int | None = None
    ) -> Any:
        strings = tuple(s for s in stop if isinstance(s, str))
        foreign = {s for s in stop if isinstance(s, int)} - self.end_ids
        if foreign:
            raise ConfigError(
                f"stop ids {sorted(foreign)} are not end ids of the sampler "
                f"({sorted(self.end_ids)}); it stops only on those"
            )
        limit = self.max_tokens if max_tokens is None else min(max_tokens, self.max_tokens)
        prompt = tuple(model_input.to_ints())
        sampling = SamplingParams(
            temperature=self.temperature,
            max_tokens=limit,
            seed=derive_seed(self.seed, f"call/{next(self._calls)}"),
            stop=strings,
        )
        generation = await self.sampler.generate(prompt, sampling=sampling)
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
