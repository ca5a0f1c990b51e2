"""Continuous batching over the sequences of one :class:`LlamaRuntime`, in one worker thread.

Each admitted request owns one KV-cache sequence until it finishes. Every step gathers one
decode token of each generating request and prompt chunks of the others into a single
``llama_decode`` call (at most ``n_batch`` ids), samples each request from its own logits row,
then retires finished or cancelled requests and admits waiting ones into the freed sequences.

A sequence keeps its ids after its request ends, so the next turn of the same rollout (its
prompt extends them) evaluates only the new ids. A new request takes the free sequence with the
longest common prefix (else the least recently used one); when another sequence holds a longer
prefix (the same system prompt and task of a group), its cells are copied with
``llama_memory_seq_cp`` instead of being evaluated again.

``deterministic`` puts one sequence in each ``llama_decode`` (round robin) for bitwise replay.
An :class:`~hermes_loop.embedded.requests.AdapterRequest` waits for the running requests to
finish, holds back the ones behind it, swaps the weights and empties the KV cache.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque

from hermes_protocols import BackendError

from hermes_loop.embedded.requests import (
    AdapterRequest,
    GenerateRequest,
    Request,
    ScoreRequest,
)
from hermes_loop.embedded.runtime import BatchEntry, LlamaRuntime

#: a prefix shorter than this is evaluated again rather than waited for and shared
_MIN_SHARED_PREFIX = 32
#: how long the idle thread sleeps between checks of its stop flag (it is woken on new work)
_IDLE_POLL_S = 1.0


class BatchScheduler:
    """Owns ``runtime`` from its thread; :meth:`submit` and :meth:`close` are thread-safe."""

    def __init__(self, runtime: LlamaRuntime, *, deterministic: bool = False) -> None:
        self.runtime = runtime
        self.deterministic = deterministic
        self._cond = threading.Condition()
        self._waiting: deque[Request] = deque()
        self._owner: list[Request | None] = [None] * runtime.n_seq
        self._used = [0] * runtime.n_seq  # last-use tick per sequence (LRU)
        self._tick = itertools.count(1)
        self._turn = 0  # round-robin position in deterministic mode
        self._closing = False
        self._thread: threading.Thread | None = None
        #: decode steps run and ids they carried (for benchmarks)
        self.steps = 0
        self.step_tokens = 0

    # -- caller side (any thread) -------------------------------------------------------------

    def submit(self, request: Request) -> None:
        with self._cond:
            if self._closing:
                raise BackendError("the embedded backend is closed")
            self._waiting.append(request)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="hermes-embedded-batch", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def close(self, timeout: float | None = None) -> None:
        """Fail the waiting requests, let the running ones finish, stop the thread."""
        with self._cond:
            self._closing = True
            while self._waiting:
                self._waiting.popleft().fail(BackendError("the embedded backend is closed"))
            thread = self._thread
            self._cond.notify()
        if thread is not None:
            thread.join(timeout)

    # -- scheduler thread ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._waiting and not self._active() and not self._closing:
                        self._cond.wait(_IDLE_POLL_S)
                    if self._closing and not self._active():
                        return
                    admitted = self._admit()
                for request in admitted:
                    if isinstance(request, ScoreRequest):
                        self._score(request)
                self._step()
        except BaseException as exc:  # never leave a caller waiting on a dead thread
            error = BackendError(f"the embedded batch scheduler stopped: {exc!r}")
            with self._cond:
                self._closing = True
                pending = [*self._waiting, *self._active()]
                self._waiting.clear()
            for request in pending:
                request.fail(error)
            raise

    def _active(self) -> list[Request]:
        return [r for r in self._owner if r is not None]

    def _admit(self) -> list[Request]:
        admitted: list[Request] = []
        while self._waiting:
            free = [s for s, r in enumerate(self._owner) if r is None]
            head = self._waiting[0]
            if not free or (isinstance(head, AdapterRequest) and self._active()):
                break
            request = self._waiting.popleft()
            if request.cancel.is_set():
                request.fail(BackendError("cancelled before it started"))
                continue
            if isinstance(request, AdapterRequest):
                self._swap_adapter(request)
                continue
            self._place(request, free)
            admitted.append(request)
        return admitted

    def _swap_adapter(self, request: AdapterRequest) -> None:
        try:
            self.runtime.set_lora(request.path, request.scale)
        except Exception as exc:
            request.fail(exc)
        else:
            request.finish()

    def _place(self, request: Request, free: list[int]) -> None:
        runtime = self.runtime
        prompt = request.prompt
        if isinstance(request, ScoreRequest) and request.fresh:
            seq = min(free, key=lambda s: self._used[s])
        else:
            seq = max(free, key=lambda s: (runtime.common_prefix(prompt, s), -self._used[s]))
        self._owner[seq] = request
        self._used[seq] = next(self._tick)
        request.seq = seq
        if isinstance(request, GenerateRequest):
            self._reuse_prefix(request)

    def _reuse_prefix(self, request: GenerateRequest) -> None:
        """Start from the longest prefix any sequence holds; or, when a request admitted
        before it will evaluate a longer common prefix, wait for that one and share it."""
        runtime, prompt, seq = self.runtime, request.prompt, request.seq
        limit = len(prompt) - 1  # the last prompt id is always evaluated, for its logits
        own = min(runtime.common_prefix(prompt, seq), limit)
        best, source = own, seq
        for other in range(runtime.n_seq):
            if other != seq and runtime.seq_len(other) > best:
                shared = min(runtime.common_prefix(prompt, other), limit)
                if shared > best:
                    best, source = shared, other
        if source == seq:
            runtime.truncate(own, seq)
        else:
            runtime.share(source, seq, best)
        request.start(best)
        for other_request in self._active():
            if (
                isinstance(other_request, GenerateRequest)
                and other_request is not request
                and other_request.wait_for is None
                and other_request.pending
            ):
                common = min(_common_prefix(prompt, other_request.prompt), limit)
                if common >= best + _MIN_SHARED_PREFIX:
                    request.wait_for, request.wait_len = other_request, common
                    return

    def _ready(self, request: GenerateRequest) -> bool:
        """Whether ``request`` can be evaluated now (the prefix it waits for is there)."""
        source = request.wait_for
        if source is None:
            return True
        runtime = self.runtime
        running = not source.done.is_set() and self._owner[source.seq] is source
        holds = runtime.common_prefix(request.prompt, source.seq) >= request.wait_len
        if holds and source.seq >= 0:
            runtime.share(source.seq, request.seq, request.wait_len)
            request.start(request.wait_len)
        elif running:
            return False  # the source is still evaluating the shared prefix
        request.wait_for = None
        return True

    def _score(self, request: ScoreRequest) -> None:
        runtime, seq, prompt = self.runtime, request.seq, request.prompt
        first_row = request.start - 1  # the logits of ids[start - 1] predict ids[start]
        try:
            keep = 0 if request.fresh else min(runtime.common_prefix(prompt, seq), first_row)
            runtime.truncate(keep, seq)
            try:
                rows = runtime.feed(prompt[keep:], rows_from=first_row - keep, seq=seq)
            finally:
                if request.fresh:
                    runtime.truncate(0, seq)
            request.finish_with(rows[:-1])
        except Exception as exc:
            request.fail(exc)
        finally:
            self._release(request)

    def _release(self, request: Request) -> None:
        with self._cond:
            if 0 <= request.seq < len(self._owner) and self._owner[request.seq] is request:
                self._owner[request.seq] = None
                self._used[request.seq] = next(self._tick)

    def _step(self) -> None:
        generating = [r for r in self._active() if isinstance(r, GenerateRequest)]
        for request in generating:
            if request.cancel.is_set():
                request.finish("abort")
                self._release(request)
        generating = [r for r in generating if not r.done.is_set()]
        if not generating:
            return
        if self.deterministic:
            ready = [r for r in generating if r.next_token is not None or self._ready(r)]
            self._turn += 1
            generating = [ready[self._turn % len(ready)]] if ready else []
        entries, owners = self._gather(generating)
        if not entries:
            return
        try:
            rows = self.runtime.decode(entries)
        except Exception as exc:
            for request in owners:
                request.fail(exc)
                self._release(request)
            return
        self.steps += 1
        self.step_tokens += sum(len(ids) for _, ids, _ in entries)
        for request, row in zip(owners, rows, strict=True):
            if row >= 0:
                self._sample(request, row)

    def _gather(
        self, requests: list[GenerateRequest]
    ) -> tuple[list[BatchEntry], list[GenerateRequest]]:
        """One decode id per generating request first, then prompt chunks in the rest; entries
        in sequence order (llama.cpp puts consecutive sequences in one micro-batch)."""
        budget = self.runtime.step_ids
        entries: list[BatchEntry] = []
        owners: list[GenerateRequest] = []
        for request in requests:
            if request.next_token is not None:
                entries.append((request.seq, (request.next_token,), True))
                owners.append(request)
                request.next_token = None
                budget -= 1
        for request in requests:
            if request.pending and budget > 0 and self._ready(request):
                chunk = request.take_prompt(budget)
                budget -= len(chunk)
                entries.append((request.seq, chunk, not request.pending))
                owners.append(request)
        order = sorted(range(len(entries)), key=lambda i: entries[i][0])
        return [entries[i] for i in order], [owners[i] for i in order]

    def _sample(self, request: GenerateRequest, row: int) -> None:
        runtime = self.runtime
        token, logprob = request.sampler.sample(runtime.logits(row))
        request.ids.append(token)
        request.logprobs.append(logprob)
        if token in runtime.eog_ids or (
            request.stops and _hit_stop(request.text, runtime.piece(token), request.stops)
        ):
            request.finish("stop")
        elif (
            len(request.ids) >= request.sampling.max_tokens
            or runtime.seq_len(request.seq) >= runtime.n_ctx
        ):
            request.finish("length")
        elif request.cancel.is_set():
            request.finish("abort")
        else:
            request.next_token = token
            return
        self._release(request)


def _hit_stop(text: bytearray, piece: bytes, stops: list[bytes]) -> bool:
    """Append ``piece`` to ``text``; whether a stop string now ends inside the new bytes.

    Byte-level matching is exact for UTF-8 (a valid encoding never matches mid-character).
    """
    before = len(text)
    text += piece
    return any(text.find(stop, max(0, before - len(stop) + 1)) >= 0 for stop in stops)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
