"""Phase 2 backend: SGLang's native ``POST /generate`` with token ids in and out.

Request: ``{"input_ids": [...], "sampling_params": {...}, "return_logprob": true,
"logprob_start_len": -1}``. Response: ``{"text", "output_ids", "meta_info": {
"output_token_logprobs": [[logprob, token_id, text|null], ...], "finish_reason": {"type":
"stop"|"length"|"abort", ...}, ...}}``. Generated ids are the ids of
``output_token_logprobs`` (EOS included when sampled) and must agree with ``output_ids``.

The logprob mode is the server's: SGLang returns the logprobs of the temperature-scaled
distribution it samples from (``sampled``) unless started with
``SGLANG_RETURN_ORIGINAL_LOGPROB=1`` (``raw``). Pass ``logprob_mode`` to say which one it runs.
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

from hermes_loop.http_client import HTTPBackend, require
from hermes_loop.logprob_modes import LogprobModeGuard

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}


class SGLangBackend(HTTPBackend):
    """A :class:`hermes_protocols.TokenBackend` for an SGLang server (``base_url`` without
    ``/generate``). ``extra_sampling`` is merged into ``sampling_params`` untouched;
    ``logprob_mode`` is the mode the server returns (``sampled`` by default)."""

    def __init__(
        self,
        base_url: str,
        *,
        extra_sampling: JSONObject | None = None,
        logprob_mode: LogprobMode = "sampled",
        **options: Any,
    ) -> None:
        super().__init__(base_url, **options)
        self.extra_sampling = dict(extra_sampling or {})
        self.logprobs = LogprobModeGuard(
            "SGLang",
            logprob_mode,
            "SGLang returns raw logprobs only when started with SGLANG_RETURN_ORIGINAL_LOGPROB=1; "
            "tell the client which one it runs.",
        )

    def request_body(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> JSONObject:
        params: JSONObject = {
            "max_new_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "skip_special_tokens": False,
            "no_stop_trim": True,
        }
        if sampling.top_k > 0:
            params["top_k"] = sampling.top_k
        if sampling.seed is not None:
            params["sampling_seed"] = sampling.seed
        if sampling.stop:
            params["stop"] = list(sampling.stop)
        params.update(self.extra_sampling)
        return {
            "input_ids": list(prompt_ids),
            "sampling_params": params,
            "return_logprob": True,
            "logprob_start_len": -1,
        }

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        mode = self.logprobs.returned(sampling.logprob_mode)
        data = await self._http.post("/generate", self.request_body(prompt_ids, sampling))
        return attrs.evolve(parse_generate_response(data), logprob_mode=mode)


def parse_generate_response(data: Mapping[str, Any]) -> Generation:
    where = "SGLang /generate response"
    meta = require(data, "meta_info", dict, where)
    entries = require(meta, "output_token_logprobs", list, f"{where} meta_info")
    ids: list[int] = []
    logprobs: list[float] = []
    for index, entry in enumerate(entries):
        if (
            not isinstance(entry, list | tuple)
            or len(entry) < 2
            or not isinstance(entry[0], int | float)
            or not isinstance(entry[1], int)
        ):
            raise BackendError(f"{where}: output_token_logprobs[{index}] is not [logprob, id, ...]")
        logprobs.append(float(entry[0]))
        ids.append(entry[1])
    output_ids = data.get("output_ids")
    if output_ids is not None and list(output_ids) != ids:
        raise BackendError(
            f"{where}: output_ids ({len(output_ids)}) and output_token_logprobs ({len(ids)}) "
            "disagree; the response is truncated or inconsistent"
        )
    finish = meta.get("finish_reason")
    kind = finish.get("type") if isinstance(finish, dict) else finish
    if kind not in _FINISH:
        raise BackendError(f"{where}: unknown or missing finish_reason {finish!r}")
    return Generation(ids=ids, logprobs=logprobs, finish_reason=_FINISH[kind])
