"""The embedded token backend: ids in, sampled ids + exact logprobs out, in-process.

One :class:`LlamaRuntime` serves every rollout. Requests queue first-come first-served on an
``anyio.Lock`` (FIFO); each runs in a worker thread. The KV cache keeps the ids it was last fed,
so a turn whose prompt extends the previous one (same rollout, next turn) only evaluates the new
suffix. Cancelling a request sets a flag the worker checks between tokens; the worker is
abandoned by the caller, and a second (thread) lock keeps the next request off the C context
until the abandoned one has stopped.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread
from hermes_protocols import (
    BackendError,
    BackendTimeout,
    ConfigError,
    FinishReason,
    Generation,
    SamplingParams,
)

from hermes_loop.embedded.model_file import resolve_model_path
from hermes_loop.embedded.runtime import (
    BATCH_INVARIANT_UBATCH,
    EmbeddedContextOverflow,
    FloatArray,
    LlamaRuntime,
)
from hermes_loop.embedded.sampling import TokenSampler, check_sampling, log_softmax

_T = TypeVar("_T")


class GenerationCancelled(BackendError):
    """Raised inside an abandoned worker when its request was cancelled (never seen by callers)."""


class EmbeddedTokenBackend:
    """A :class:`hermes_protocols.TokenBackend` on an in-process llama.cpp model.

    Logprobs are those of the *unmodified* model distribution, ``log_softmax(logits)`` at
    temperature 1 without top-k/top-p truncation, for the token actually sampled; they equal a
    teacher-forced recompute of the same ids (see :meth:`score`). Generation stops at an
    end-of-generation token (included in the ids, finish ``"stop"``), at a ``stop`` string
    (the ids up to and including the token that completed it, finish ``"stop"``), at
    ``max_tokens`` or a full context (finish ``"length"``). The end-of-generation ids are all
    those the GGUF declares (:attr:`end_token_ids`), not only EOS.

    Build with :meth:`open` (async, loads in a thread) and close with :meth:`aclose` or
    ``async with``. ``timeout_s`` bounds each request, queueing included
    (:class:`BackendTimeout`).
    """

    def __init__(self, runtime: LlamaRuntime, *, timeout_s: float | None = None) -> None:
        self._runtime = runtime
        self._queue = anyio.Lock()
        self._engine = threading.Lock()
        self._closing = False  # set by aclose: queued requests fail instead of running
        self._closed = False
        self.timeout_s = timeout_s
        #: prompt tokens reused from the KV cache / evaluated by the last request
        self.last_reused = 0
        self.last_evaluated = 0

    @classmethod
    async def open(
        cls,
        model: str | Path | None = None,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        n_batch: int = 512,
        n_ubatch: int = BATCH_INVARIANT_UBATCH,
        timeout_s: float | None = None,
        quiet: bool = True,
    ) -> EmbeddedTokenBackend:
        """Load ``model`` (a ``.gguf`` path, default SmolLM2-135M-Instruct) in a worker thread."""
        path = resolve_model_path(model)
        runtime = await anyio.to_thread.run_sync(
            lambda: LlamaRuntime(
                path,
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_batch=n_batch,
                n_ubatch=n_ubatch,
                quiet=quiet,
            )
        )
        return cls(runtime, timeout_s=timeout_s)

    @property
    def runtime(self) -> LlamaRuntime:
        return self._runtime

    @property
    def n_ctx(self) -> int:
        return self._runtime.n_ctx

    @property
    def end_token_ids(self) -> frozenset[int]:
        """The GGUF's end-of-generation ids; generation stops on any of them (SmolLM2: 0, 2, 4).

        Pass them to :class:`hermes_loop.TokenModel` (``end_token_ids=``) so the loop knows
        every way a turn can end.
        """
        return self._runtime.eog_ids

    @property
    def cached_ids(self) -> tuple[int, ...]:
        """The ids whose keys/values are in the KV cache right now."""
        return self._runtime.cached

    async def __aenter__(self) -> EmbeddedTokenBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Let the running request (if any) finish, fail the queued ones, free the model."""
        self._closing = True
        with anyio.CancelScope(shield=True):
            async with self._queue:
                if self._closed:
                    return
                self._closed = True
                await anyio.to_thread.run_sync(self._close_sync)

    def _close_sync(self) -> None:
        with self._engine:
            self._runtime.close()

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        check_sampling(sampling)
        ids = self._checked_ids(prompt_ids)
        return await self._run(lambda cancel: self._generate_sync(ids, sampling, cancel))

    async def score(self, ids: Sequence[int], *, start: int = 1) -> list[float]:
        """Teacher-forced logprobs of ``ids[start:]``, each given all ids before it.

        Evaluates the whole sequence in one pass from an empty cache (the reference a trainer
        computes); element ``i`` is the logprob of ``ids[start + i]``.
        """
        checked = self._checked_ids(ids)
        if not 1 <= start <= len(checked):
            raise ConfigError(f"start must be in [1, {len(checked)}], got {start}")
        return await self._run(lambda cancel: self._score_sync(checked, start))

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

    async def _run(self, work: Callable[[threading.Event], _T]) -> _T:
        timeout = math.inf if self.timeout_s is None else self.timeout_s
        cancel = threading.Event()
        try:
            with anyio.fail_after(timeout):
                async with self._queue:
                    if self._closing:
                        raise BackendError("the embedded backend is closed")
                    return await anyio.to_thread.run_sync(work, cancel, abandon_on_cancel=True)
        except TimeoutError as exc:
            raise BackendTimeout(
                f"the embedded model did not answer within {self.timeout_s} s "
                "(queueing included); raise timeout_s or lower max_tokens"
            ) from exc
        finally:
            cancel.set()

    # -- worker-thread side ------------------------------------------------------------------

    def _prefill(self, ids: list[int], cancel: threading.Event) -> FloatArray:
        """Bring the KV cache to ``ids`` reusing the longest cached prefix; return last logits."""
        runtime = self._runtime
        reuse = min(runtime.common_prefix(ids), len(ids) - 1)
        runtime.truncate(reuse)
        self.last_reused, self.last_evaluated = reuse, len(ids) - reuse
        logits: FloatArray | None = None
        for offset in range(reuse, len(ids), runtime.n_batch):
            if cancel.is_set():
                raise GenerationCancelled("cancelled during prompt evaluation")
            logits = runtime.feed(ids[offset : offset + runtime.n_batch])
        assert logits is not None
        return logits

    def _generate_sync(
        self, ids: list[int], sampling: SamplingParams, cancel: threading.Event
    ) -> Generation:
        with self._engine:
            if self._closed:
                raise BackendError("the embedded backend is closed")
            return self._generate_locked(ids, sampling, cancel)

    def _generate_locked(
        self, ids: list[int], sampling: SamplingParams, cancel: threading.Event
    ) -> Generation:
        runtime = self._runtime
        end_ids = runtime.eog_ids
        logits = self._prefill(ids, cancel)
        sampler = TokenSampler(sampling)
        stops = [s.encode("utf-8") for s in sampling.stop if s]
        text = bytearray()
        out: list[int] = []
        logprobs: list[float] = []
        finish: FinishReason = "length"
        while True:
            token, logprob = sampler.sample(logits)
            out.append(token)
            logprobs.append(logprob)
            if token in end_ids:
                finish = "stop"
                break
            if stops and _hit_stop(text, runtime.piece(token), stops):
                finish = "stop"
                break
            if len(out) >= sampling.max_tokens or runtime.n_cached >= runtime.n_ctx:
                break
            if cancel.is_set():
                finish = "abort"
                break
            logits = runtime.feed_one(token)
        return Generation(ids=out, logprobs=logprobs, finish_reason=finish)

    def _score_sync(self, ids: list[int], start: int) -> list[float]:
        with self._engine:
            if self._closed:
                raise BackendError("the embedded backend is closed")
            self._runtime.truncate(0)
            try:
                rows = self._runtime.feed(ids, all_logits=True)
            finally:
                self._runtime.truncate(0)
            logprobs = log_softmax(rows[start - 1 : len(ids) - 1])
            targets = ids[start:]
            return [float(logprobs[i, t]) for i, t in enumerate(targets)]


def _hit_stop(text: bytearray, piece: bytes, stops: list[bytes]) -> bool:
    """Append ``piece`` to ``text``; whether a stop string now ends inside the new bytes.

    Byte-level matching is exact for UTF-8 (a valid encoding never matches mid-character).
    """
    before = len(text)
    text += piece
    return any(text.find(stop, max(0, before - len(stop) + 1)) >= 0 for stop in stops)
