"""Phase 2 backend: llama.cpp ``llama-server`` ``POST /completion`` with a token-id prompt.

Request: ``{"prompt": [ids], "n_predict", "temperature", "top_k", "top_p", "min_p": 0,
"n_probs": 1, "return_tokens": true, "cache_prompt": true, ...}``. Response: ``tokens`` (the
generated ids, EOS included), ``completion_probabilities`` (``[{"id", "logprob", "token",
"bytes", "top_logprobs"}, ...]``), ``stop_type`` (``eos``/``word``/``limit``/``none``) and
``truncated``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hermes_protocols import BackendError, FinishReason, Generation, JSONObject, SamplingParams

from hermes_loop.http_client import HTTPBackend, finish_body, require

_FINISH: dict[str, FinishReason] = {"eos": "stop", "word": "stop", "limit": "length"}


class LlamaServerBackend(HTTPBackend):
    """A :class:`hermes_protocols.TokenBackend` for ``llama-server``. ``min_p`` is sent as 0
    (llama-server defaults to 0.05) so sampling follows :class:`SamplingParams` exactly;
    ``extra_body`` is merged into every request untouched."""

    def __init__(self, base_url: str, *, extra_body: JSONObject | None = None, **options: Any):
        super().__init__(base_url, **options)
        self.extra_body = dict(extra_body or {})

    def request_body(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> JSONObject:
        body: JSONObject = {
            "prompt": list(prompt_ids),
            "n_predict": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_k": sampling.top_k,
            "top_p": sampling.top_p,
            "min_p": 0.0,
            "n_probs": 1,
            "return_tokens": True,
            "cache_prompt": True,
            "stream": False,
        }
        return finish_body(body, sampling, self.extra_body)

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        data = await self._http.post("/completion", self.request_body(prompt_ids, sampling))
        return parse_completion_response(data)


def parse_completion_response(data: Mapping[str, Any]) -> Generation:
    where = "llama-server /completion response"
    probs = data.get("completion_probabilities", data.get("probs"))
    if not isinstance(probs, list):
        raise BackendError(f"{where}: no completion_probabilities; the request must set n_probs")
    ids: list[int] = []
    logprobs: list[float] = []
    for index, entry in enumerate(probs):
        if not isinstance(entry, dict):
            raise BackendError(f"{where}: completion_probabilities[{index}] is not an object")
        token = entry.get("id")
        logprob = entry.get("logprob")
        if not isinstance(token, int) or not isinstance(logprob, int | float):
            raise BackendError(
                f"{where}: completion_probabilities[{index}] lacks 'id'/'logprob' (send "
                "post_sampling_probs=false)"
            )
        ids.append(token)
        logprobs.append(float(logprob))
    tokens = require(data, "tokens", list, where)
    if tokens != ids:
        raise BackendError(
            f"{where}: tokens ({len(tokens)}) and completion_probabilities ({len(ids)}) "
            "disagree; the response is truncated or inconsistent"
        )
    stop_type = data.get("stop_type")
    if data.get("truncated") is True:
        finish: FinishReason = "length"
    elif isinstance(stop_type, str) and stop_type in _FINISH:
        finish = _FINISH[stop_type]
    else:
        raise BackendError(f"{where}: generation did not finish (stop_type={stop_type!r})")
    return Generation(ids=ids, logprobs=logprobs, finish_reason=finish)
