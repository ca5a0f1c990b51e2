"""The embedded token backend: ids in, sampled ids + exact logprobs out, in-process.

One :class:`LlamaRuntime` with ``n_seq`` KV-cache sequences serves every rollout through a
:class:`~hermes_loop.embedded.scheduler.BatchScheduler`: up to ``n_seq`` requests run at once,
batched into shared ``llama_decode`` calls in the scheduler's thread; the others wait in
arrival order. A caller waits in a worker thread it abandons on cancellation; the scheduler
sees the cancel flag before its next step and frees the request's sequence.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread
from hermes_protocols import (
    BackendError,
    BackendTimeout,
    ConfigError,
    Generation,
    SamplingParams,
)

from hermes_loop.embedded.model_file import resolve_model_path
from hermes_loop.embedded.requests import AdapterRequest, GenerateRequest, Request, ScoreRequest
from hermes_loop.embedded.runtime import (
    BATCH_INVARIANT_UBATCH,
    EmbeddedContextOverflow,
    FloatArray,
    LlamaRuntime,
)
from hermes_loop.embedded.sampling import check_sampling, log_softmax
from hermes_loop.embedded.scheduler import BatchScheduler
from hermes_loop.embedded.weight_types import note_unbatched

_T = TypeVar("_T", Generation, FloatArray, None)


class EmbeddedTokenBackend:
    """A :class:`hermes_protocols.TokenBackend` on an in-process llama.cpp model.

    Logprobs follow ``SamplingParams.logprob_mode`` (``"sampled"``: the distribution the token
    was drawn from, tempered and truncated, renormalized, ``0.0`` when greedy; ``"raw"``: the
    untempered ``log_softmax(logits)``), always computed from the logits row the token was
    sampled from; ``Generation.logprob_mode`` says which. Generation stops at an
    end-of-generation token (included in the ids, finish ``"stop"``), at a ``stop`` string (the
    ids up to and including the token that completed it, finish ``"stop"``), at ``max_tokens``
    or a full context (finish ``"length"``). The end-of-generation ids are all those the GGUF
    declares (:attr:`end_token_ids`), not only EOS.

    Build with :meth:`open` (async, loads in a thread) and close with :meth:`aclose` or
    ``async with``. ``timeout_s`` bounds each request, queueing included
    (:class:`BackendTimeout`). ``deterministic`` runs one sequence per ``llama_decode``.
    """

    def __init__(
        self,
        runtime: LlamaRuntime,
        *,
        timeout_s: float | None = None,
        deterministic: bool = False,
    ) -> None:
        self._runtime = runtime
        self._scheduler = BatchScheduler(runtime, deterministic=deterministic)
        self._closing = False
        self._closed = False
        self._waiters: anyio.CapacityLimiter | None = None
        self.timeout_s = timeout_s
        #: prompt tokens reused from the KV cache / evaluated by the last finished request
        self.last_reused = 0
        self.last_evaluated = 0

    @classmethod
    async def open(
        cls,
        model: str | Path | None = None,
        *,
        n_ctx: int = 2048,
        concurrency: int = 1,
        n_threads: int | None = None,
        n_batch: int = 512,
        n_ubatch: int = BATCH_INVARIANT_UBATCH,
        timeout_s: float | None = None,
        deterministic: bool = False,
        quiet: bool = True,
        cache_dir: str | Path | None = None,
    ) -> EmbeddedTokenBackend:
        """Load ``model`` (a ``.gguf`` path, used as it is; default SmolLM2-135M-Instruct,
        converted once into ``cache_dir``: :func:`~hermes_loop.embedded.default_model_path`)
        in a worker thread. Logs one line when the file's weight type has no batched CPU kernel.

        ``n_ctx`` is the context of one sequence; ``concurrency`` the number of sequences (the
        requests that run at once), so the KV cache holds ``n_ctx * concurrency`` tokens.
        """
        path = await anyio.to_thread.run_sync(
            lambda: resolve_model_path(model, cache_dir=cache_dir)
        )
        runtime = await anyio.to_thread.run_sync(
            lambda: LlamaRuntime(
                path,
                n_ctx=n_ctx,
                n_seq=concurrency,
                n_threads=n_threads,
                n_batch=n_batch,
                n_ubatch=n_ubatch,
                quiet=quiet,
            )
        )
        note_unbatched(path.name, runtime.metadata("general.file_type"))
        return cls(runtime, timeout_s=timeout_s, deterministic=deterministic)

    @property
    def runtime(self) -> LlamaRuntime:
        return self._runtime

    @property
    def scheduler(self) -> BatchScheduler:
        return self._scheduler

    @property
    def n_ctx(self) -> int:
        return self._runtime.n_ctx

    @property
    def concurrency(self) -> int:
        return self._runtime.n_seq

    @property
    def end_token_ids(self) -> frozenset[int]:
        """The GGUF's end-of-generation ids; generation stops on any of them (SmolLM2: 0, 2, 4).

        Pass them to :class:`hermes_loop.TokenModel` (``end_token_ids=``) so the loop knows
        every way a turn can end.
        """
        return self._runtime.eog_ids

    @property
    def cached_ids(self) -> tuple[int, ...]:
        """The ids whose keys/values are in the KV cache of sequence 0 right now."""
        return self._runtime.cached

    async def __aenter__(self) -> EmbeddedTokenBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Let the running requests finish, fail the queued ones, free the model."""
        self._closing = True
        with anyio.CancelScope(shield=True):
            if self._closed:
                return
            self._closed = True
            await anyio.to_thread.run_sync(self._close_sync)

    def _close_sync(self) -> None:
        self._scheduler.close()
        self._runtime.close()

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        check_sampling(sampling)
        request = GenerateRequest(self._checked_ids(prompt_ids), sampling)
        generation = await self._run(request, request.outcome)
        self.last_reused, self.last_evaluated = request.reused, request.evaluated
        return generation

    async def score(self, ids: Sequence[int], *, start: int = 1, fresh: bool = True) -> list[float]:
        """Teacher-forced raw logprobs of ``ids[start:]``, each given all ids before it.

        Evaluates the whole sequence in one pass from an empty sequence (the reference a
        trainer computes); element ``i`` is ``log_softmax`` of ``ids[start + i]``. Logits are
        computed for those positions only: scoring just a completion costs less. With
        ``fresh=False`` the pass starts after the longest prefix a sequence of the cache holds
        (a group's shared prompt is evaluated once; the logits are the same, see
        :mod:`~hermes_loop.embedded.runtime`) and leaves ``ids`` cached for the next call.
        """
        rows = await self.teacher_logits(ids, start=start, fresh=fresh)
        targets = list(ids[start:])
        return await anyio.to_thread.run_sync(_pick_logprobs, rows, targets)

    async def teacher_logits(
        self, ids: Sequence[int], *, start: int = 1, fresh: bool = True
    ) -> FloatArray:
        """Teacher-forced logits: row ``i`` is the distribution of ``ids[start + i]`` given the
        ids before it (shape ``(len(ids) - start, n_vocab)``), from one pass over ``ids``
        (``fresh``: as for :meth:`score`)."""
        checked = self._checked_ids(ids)
        if not 1 <= start <= len(checked):
            raise ConfigError(f"start must be in [1, {len(checked)}], got {start}")
        request = ScoreRequest(checked, start, fresh=fresh)
        return await self._run(request, request.outcome)

    async def load_lora(self, path: str | Path | None, *, scale: float = 1.0) -> None:
        """Generate with the GGUF LoRA adapter at ``path`` from now on (``None``: the base
        weights). Waits for the running requests, then empties the KV cache (its keys and
        values came from the old weights); requests submitted later see the new weights."""
        request = AdapterRequest(None if path is None else Path(path), scale)
        await self._run(request, request.outcome)

    def _checked_ids(self, prompt_ids: Sequence[int]) -> list[int]:
        ids = [int(i) for i in prompt_ids]
        if not ids:
            raise ConfigError("the prompt is empty")
        n_vocab = self._runtime.n_vocab
        if min(ids) < 0 or max(ids) >= n_vocab:
            raise ConfigError(f"prompt ids must be in [0, {n_vocab})")
        if len(ids) >= self._runtime.n_ctx:
            raise EmbeddedContextOverflow(
                f"the prompt has {len(ids)} tokens; the context holds {self._runtime.n_ctx}"
            )
        return ids

    async def _run(self, request: Request, outcome: Callable[[], _T]) -> _T:
        if self._waiters is None:  # one waiting thread per request that may be running
            self._waiters = anyio.CapacityLimiter(self._runtime.n_seq + 1)
        timeout = math.inf if self.timeout_s is None else self.timeout_s
        try:
            with anyio.fail_after(timeout):
                if self._closing:
                    raise BackendError("the embedded backend is closed")
                self._scheduler.submit(request)
                # the thread's own bound only backs up the one above, which fires first
                backstop = None if self.timeout_s is None else self.timeout_s + 5.0
                await anyio.to_thread.run_sync(
                    request.wait, backstop, abandon_on_cancel=True, limiter=self._waiters
                )
        except TimeoutError as exc:
            raise BackendTimeout(
                f"the embedded model did not answer within {self.timeout_s} s "
                "(queueing included); raise timeout_s or lower max_tokens"
            ) from exc
        finally:
            request.cancel.set()  # no effect once finished; otherwise frees its sequence
        return outcome()


def _pick_logprobs(rows: FloatArray, targets: list[int]) -> list[float]:
    logprobs = log_softmax(rows)
    return [float(logprobs[i, t]) for i, t in enumerate(targets)]
