"""Phase 2 backend: llama.cpp ``llama-server`` ``POST /completion`` with a token-id prompt.

Request: ``{"prompt": [ids], "n_predict", "temperature", "top_k", "top_p", "min_p": 0,
"n_probs": 1, "post_sampling_probs", "return_tokens": true, "cache_prompt": true, ...}``.
Response: ``tokens`` (the generated ids, EOS included), ``completion_probabilities``
(``[{"id", "logprob"|"prob", "token", "bytes", ...}, ...]``), ``stop_type``
(``eos``/``word``/``limit``/``none``) and ``truncated``.

``tokens`` is the source of truth. llama-server leaves out the probability entry of a token
after which the generated text ends inside a UTF-8 character (the byte tokens of ``Ѷ``) and
trims entries at a stop word, so the entries are aligned to the tokens by id (see
:func:`align_entries`). Where a repeated id leaves an entry's position open (``E2 80 80``: which
``0x80`` has it?), the tokens' bytes (``token_bytes``, from the tokenizer) settle it with the
server's own rule (:func:`utf8_complete`). A position without an entry keeps its id and is
reported in ``Generation.missing_logprobs`` (logprob NaN). llama-server cannot score such a
position later either: it never emits an entry while its generated text ends inside a character.

Logprob mode: ``sampled`` sends ``post_sampling_probs`` (the probability after temperature,
top-k and top-p, i.e. of the distribution the token was drawn from); ``raw`` the model's
untempered log-softmax.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hermes_protocols import (
    BackendError,
    FinishReason,
    Generation,
    JSONObject,
    LogprobMode,
    SamplingParams,
)

from hermes_loop.http_client import HTTPBackend, finish_body, require
from hermes_loop.token_bytes import TokenBytes

_FINISH: dict[str, FinishReason] = {"eos": "stop", "word": "stop", "limit": "length"}
_WHERE = "llama-server /completion response"


class LlamaServerBackend(HTTPBackend):
    """A :class:`hermes_protocols.TokenBackend` for ``llama-server``. ``min_p`` is sent as 0
    (llama-server defaults to 0.05) so sampling follows :class:`SamplingParams` exactly;
    ``extra_body`` is merged into every request untouched; ``token_bytes`` (the served
    vocabulary's bytes per id) places the entries of repeated byte tokens."""

    def __init__(
        self,
        base_url: str,
        *,
        extra_body: JSONObject | None = None,
        token_bytes: TokenBytes | None = None,
        **options: Any,
    ):
        super().__init__(base_url, **options)
        self.extra_body = dict(extra_body or {})
        self.token_bytes = token_bytes

    def request_body(self, prompt_ids: Sequence[int], sampling: SamplingParams) -> JSONObject:
        body: JSONObject = {
            "prompt": list(prompt_ids),
            "n_predict": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_k": sampling.top_k,
            "top_p": sampling.top_p,
            "min_p": 0.0,
            "n_probs": 1,
            "post_sampling_probs": sampling.logprob_mode == "sampled",
            "return_tokens": True,
            "cache_prompt": True,
            "stream": False,
        }
        return finish_body(body, sampling, self.extra_body)

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        body = self.request_body(prompt_ids, sampling)
        data = await self._http.post("/completion", body)
        return parse_completion_response(data, token_bytes=self.token_bytes)

    async def end_token_ids(self) -> frozenset[int]:
        """Every id the server ends a generation on (its vocabulary's end-of-generation set).

        llama-server adds a ``-inf`` bias for each of them when a request sets ``ignore_eos``
        and echoes the biases in ``generation_settings.logit_bias``: one tiny request reads
        them from the server itself."""
        data = await self._http.post(
            "/completion",
            {"prompt": " ", "n_predict": 1, "ignore_eos": True, "temperature": 0.0, "n_probs": 0},
        )
        settings = require(data, "generation_settings", dict, _WHERE)
        biases = require(settings, "logit_bias", list, f"{_WHERE} generation_settings")
        ids = frozenset(
            entry["token"]
            for entry in biases
            if isinstance(entry, dict) and isinstance(entry.get("token"), int)
        )
        if not ids:
            raise BackendError(
                "llama-server reported no end-of-generation ids (generation_settings.logit_bias "
                "is empty with ignore_eos); pass the end ids explicitly"
            )
        return ids


def utf8_complete(pieces: Sequence[bytes]) -> list[bool]:
    """For each position, whether llama-server sees the text generated through it as complete:
    its ``validate_utf8`` looks at the last four bytes for a lead byte still missing bytes."""
    complete: list[bool] = []
    tail = b""
    for piece in pieces:
        tail = (tail + piece)[-4:]
        cut = any(
            (tail[-i] & 0xE0 == 0xC0 and i < 2)
            or (tail[-i] & 0xF0 == 0xE0 and i < 3)
            or (tail[-i] & 0xF8 == 0xF0 and i < 4)
            for i in range(1, len(tail) + 1)
        )
        complete.append(not cut)
    return complete


def _embed(
    tokens: Sequence[int], entry_ids: Sequence[int], eligible: Sequence[bool]
) -> list[int | None] | None:
    """Entries placed where every embedding into the eligible positions agrees; ``None`` when
    there is no embedding."""
    n, m = len(tokens), len(entry_ids)
    earliest: list[int] = []
    position = 0
    for entry in entry_ids:
        while position < n and not (eligible[position] and tokens[position] == entry):
            position += 1
        if position == n:
            return None
        earliest.append(position)
        position += 1
    latest = [0] * m
    position = n - 1
    for index in range(m - 1, -1, -1):
        while not (eligible[position] and tokens[position] == entry_ids[index]):
            position -= 1
        latest[index] = position
        position -= 1
    placed: list[int | None] = [None] * n
    for index in range(m):
        if earliest[index] == latest[index]:
            placed[earliest[index]] = index
    return placed


def align_entries(
    tokens: Sequence[int], entry_ids: Sequence[int], complete: Sequence[bool] | None = None
) -> list[int | None]:
    """For each token, the index of its probability entry, or ``None`` when it has none.

    The entries are a subsequence of the tokens. An entry is placed only where every such
    embedding agrees (its earliest and latest possible positions coincide), so a repeated id
    (two ``0x80`` byte tokens, one without an entry) is never given another position's value.
    ``complete`` (:func:`utf8_complete` of the tokens' bytes) rules out the positions llama-server
    never gives an entry, which settles most repeated ids; it is ignored when the entries do
    not fit it (a stop word or special token the bytes do not model).
    Raises :class:`BackendError` when the entries are no subsequence of the tokens.
    """
    if complete is not None:
        placed = _embed(tokens, entry_ids, complete)
        if placed is not None:
            return placed
    placed = _embed(tokens, entry_ids, [True] * len(tokens))
    if placed is None:
        raise BackendError(
            f"{_WHERE}: completion_probabilities ids are not a subsequence of tokens; the "
            "response is inconsistent"
        )
    return placed


def _entry_logprob(entry: Mapping[str, Any], index: int) -> tuple[int, float | None, LogprobMode]:
    token = entry.get("id")
    if not isinstance(token, int):
        raise BackendError(f"{_WHERE}: completion_probabilities[{index}] lacks 'id'")
    if isinstance(entry.get("logprob"), int | float):
        return token, float(entry["logprob"]), "raw"
    prob = entry.get("prob")
    if isinstance(prob, int | float):
        return token, (math.log(prob) if prob > 0 else None), "sampled"
    raise BackendError(f"{_WHERE}: completion_probabilities[{index}] lacks 'logprob'/'prob'")


def parse_completion_response(
    data: Mapping[str, Any], *, token_bytes: TokenBytes | None = None
) -> Generation:
    """The generation in ``data``: every token of ``tokens``, each with its entry's logprob or,
    without an entry, NaN and its position in ``missing_logprobs`` (``token_bytes``: see
    :func:`align_entries`)."""
    tokens = require(data, "tokens", list, _WHERE)
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise BackendError(f"{_WHERE}: tokens holds a non-integer")
    probs = data.get("completion_probabilities", data.get("probs", []))
    if not isinstance(probs, list):
        raise BackendError(f"{_WHERE}: completion_probabilities is not a list")
    entries: list[tuple[int, float | None]] = []
    modes: set[LogprobMode] = set()
    for index, entry in enumerate(probs):
        if not isinstance(entry, dict):
            raise BackendError(f"{_WHERE}: completion_probabilities[{index}] is not an object")
        token, logprob, entry_mode = _entry_logprob(entry, index)
        entries.append((token, logprob))
        modes.add(entry_mode)
    if len(modes) > 1:
        raise BackendError(f"{_WHERE}: entries mix 'logprob' and 'prob'")
    complete = utf8_complete([token_bytes(t) for t in tokens]) if token_bytes else None
    placed = align_entries(tokens, [token for token, _ in entries], complete)
    logprobs: list[float] = []
    missing: list[int] = []
    for position, placed_index in enumerate(placed):
        value = None if placed_index is None else entries[placed_index][1]
        if value is None:
            missing.append(position)
            logprobs.append(math.nan)
        else:
            logprobs.append(value)
    stop_type = data.get("stop_type")
    if data.get("truncated") is True:
        finish: FinishReason = "length"
    elif isinstance(stop_type, str) and stop_type in _FINISH:
        finish = _FINISH[stop_type]
    else:
        raise BackendError(f"{_WHERE}: generation did not finish (stop_type={stop_type!r})")
    settings = data.get("generation_settings")
    post_sampling = isinstance(settings, dict) and settings.get("post_sampling_probs") is True
    mode: LogprobMode = modes.pop() if modes else ("sampled" if post_sampling else "raw")
    return Generation(
        ids=tokens,
        logprobs=logprobs,
        finish_reason=finish,
        logprob_mode=mode,
        missing_logprobs=missing,
    )
