"""The work the batch scheduler does for one caller: a generation, a teacher-forced score or a
change of weights (a LoRA adapter).

A request is created on the event loop, handed to the scheduler's thread, and finished there
exactly once (:meth:`Request.finish` / :meth:`Request.fail`); the caller waits on
:attr:`Request.done` from a worker thread and may set :attr:`Request.cancel` at any time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from hermes_protocols import BackendError, FinishReason, Generation, SamplingParams

from hermes_loop.embedded.runtime import FloatArray
from hermes_loop.embedded.sampling import TokenSampler


class Request:
    """Common state: the prompt, the sequence it runs on, the outcome and the two flags."""

    def __init__(self, prompt: Sequence[int]) -> None:
        self.prompt = list(prompt)
        self.cancel = threading.Event()
        self.done = threading.Event()
        self.seq = -1
        self._error: BaseException | None = None

    def fail(self, error: BaseException) -> None:
        self._error = error
        self.done.set()

    def wait(self, timeout: float | None) -> None:
        """Block (in a worker thread) until the scheduler finished the request."""
        if not self.done.wait(timeout):
            raise BackendError("the embedded model did not finish the request in time")

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error


class GenerateRequest(Request):
    """A generation: its pending prompt ids, its sampler and what it produced so far."""

    def __init__(self, prompt: Sequence[int], sampling: SamplingParams) -> None:
        super().__init__(prompt)
        self.sampling = sampling
        self.sampler = TokenSampler(sampling)
        self.stops = [s.encode("utf-8") for s in sampling.stop if s]
        self.pending: list[int] = []
        self.next_token: int | None = None
        self.ids: list[int] = []
        self.logprobs: list[float] = []
        self.text = bytearray()
        #: prompt ids found in the KV cache (own or shared prefix) / evaluated for this request
        self.reused = 0
        self.evaluated = 0
        #: an earlier request whose prompt shares ``wait_len`` leading ids with this one: this
        #: one waits until that prefix is evaluated, then shares its cells
        self.wait_for: GenerateRequest | None = None
        self.wait_len = 0
        self._generation: Generation | None = None

    def start(self, reused: int) -> None:
        """The first ``reused`` prompt ids are in the sequence; the rest still to evaluate."""
        self.reused, self.evaluated = reused, len(self.prompt) - reused
        self.pending = self.prompt[reused:]

    def take_prompt(self, limit: int) -> list[int]:
        chunk, self.pending = self.pending[:limit], self.pending[limit:]
        return chunk

    def finish(self, reason: FinishReason) -> None:
        self._generation = Generation(
            ids=self.ids,
            logprobs=self.logprobs,
            finish_reason=reason,
            logprob_mode=self.sampling.logprob_mode,
        )
        self.done.set()

    def outcome(self) -> Generation:
        self._raise_error()
        assert self._generation is not None
        return self._generation


class ScoreRequest(Request):
    """Teacher-forced logits rows for ``prompt[start:]`` (row ``i`` predicts
    ``prompt[start + i]``), evaluated from an empty sequence, or (not ``fresh``) after the
    longest prefix a sequence holds, and left cached."""

    def __init__(self, ids: Sequence[int], start: int, *, fresh: bool = True) -> None:
        super().__init__(ids)
        self.start = start
        self.fresh = fresh
        self._rows: FloatArray | None = None

    def finish_with(self, rows: FloatArray) -> None:
        self._rows = rows
        self.done.set()

    def outcome(self) -> FloatArray:
        self._raise_error()
        assert self._rows is not None
        return self._rows


class AdapterRequest(Request):
    """Swap the LoRA adapter (``None``: the base weights) once no request is running; requests
    submitted after it run with the new weights."""

    def __init__(self, path: Path | None, scale: float) -> None:
        super().__init__(())
        self.path = path
        self.scale = scale

    def finish(self) -> None:
        self.done.set()

    def outcome(self) -> None:
        self._raise_error()
