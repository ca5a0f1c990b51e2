"""Phase 2 backend: vLLM's OpenAI ``POST /v1/completions`` with a token-id prompt.

Request: ``{"model", "prompt": [ids], "max_tokens", ..., "logprobs": 1,
"return_tokens_as_token_ids": true, "skip_special_tokens": false}``. Response:
``choices[0].logprobs`` with ``tokens`` (``"token_id:<id>"`` strings) and ``token_logprobs``,
and ``choices[0].finish_reason``.

The logprob mode is the server's: ``vllm serve --logprobs-mode processed_logprobs`` returns the
sampled distribution's logprobs (temperature, top-k, top-p applied); the default
``raw_logprobs`` the model's log-softmax. Pass ``logprob_mode`` to say which one it runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from hermes_protocols import (
    BackendError,
    FinishReason,
    Generation,
    JSONObject,
    LogprobMode,
    SamplingParams,
)

from hermes_loop.http_client import HTTPBackend, finish_body, require
from hermes_loop.logprob_modes import LogprobModeGuard

_FINISH: dict[str | None, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}
_PREFIX = "token_id:"


class VLLMBackend(HTTPBackend):
    """A :class:`hermes_protocols.TokenBackend` for a vLLM OpenAI server (``base_url`` ends
    with ``/v1``). ``extra_body`` is merged into every request untouched; ``logprob_mode`` is
    the mode the server was started with (``raw`` unless ``--logprobs-mode
    processed_logprobs``)."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        extra_body: JSONObject | None = None,
        logprob_mode: LogprobMode = "raw",
        **options: Any,
    ) -> None:
        super().__init__(base_url, **options)
        self.model = model
        self.extra_body = dict(extra_body or {})
        self.logprobs = LogprobModeGuard(
            "vLLM",
            logprob_mode,
            "Start vLLM with --logprobs-mode processed_logprobs (sampled) or raw_logprobs (raw) "
            "and tell the client which one it runs.",
        )

    def request_body(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> JSONObject:
        body: JSONObject = {
            "model": self.model,
            "prompt": list(prompt_ids),
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "n": 1,
            "logprobs": 1,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        if sampling.top_k > 0:
            body["top_k"] = sampling.top_k
        return finish_body(body, sampling, self.extra_body)

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        mode = self.logprobs.returned(sampling.logprob_mode)
        data = await self._http.post("/completions", self.request_body(prompt_ids, sampling))
        return attrs.evolve(parse_completion_response(data), logprob_mode=mode)


def parse_completion_response(data: Mapping[str, Any]) -> Generation:
    where = "vLLM /v1/completions response"
    choices = require(data, "choices", list, where)
    if not choices or not isinstance(choices[0], dict):
        raise BackendError(f"{where}: no choices")
    choice = choices[0]
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        raise BackendError(f"{where}: no logprobs; the request must set logprobs")
    tokens = require(logprobs, "tokens", list, f"{where} logprobs")
    values = require(logprobs, "token_logprobs", list, f"{where} logprobs")
    if len(tokens) != len(values):
        raise BackendError(
            f"{where}: {len(tokens)} tokens but {len(values)} token_logprobs (truncated?)"
        )
    ids = [_token_id(token, where) for token in tokens]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise BackendError(f"{where}: token_logprobs holds a non-number")
    finish = choice.get("finish_reason")
    if finish not in _FINISH or finish is None:
        raise BackendError(f"{where}: unknown or missing finish_reason {finish!r}")
    return Generation(ids=ids, logprobs=[float(v) for v in values], finish_reason=_FINISH[finish])


def _token_id(token: Any, where: str) -> int:
    if isinstance(token, str) and token.startswith(_PREFIX):
        try:
            return int(token[len(_PREFIX) :])
        except ValueError:
            pass
    raise BackendError(
        f"{where}: token {token!r} is not 'token_id:<id>'; start vLLM with a version that "
        "supports return_tokens_as_token_ids"
    )
