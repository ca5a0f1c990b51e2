"""Phase 1 backend: an OpenAI-compatible ``POST /chat/completions`` over httpx.

Works with OpenAI, OpenRouter, vLLM, SGLang and llama.cpp servers. ``extra_body`` keys are
merged into the request top level untouched (provider preferences, ``chat_template_kwargs``...).
Reasoning is read from ``reasoning_content``, ``reasoning`` or ``reasoning_details``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from hermes_protocols import (
    BackendError,
    ChatChoice,
    ChatResult,
    ConversionError,
    FinishReason,
    JSONObject,
    Message,
    SamplingParams,
    ToolSchema,
    Usage,
)
from hermes_protocols.convert import message_from_openai, messages_to_openai, tools_to_openai

from hermes_loop.http_client import JSONPoster, RetryPolicy, require

_FINISH: dict[str | None, FinishReason] = {
    None: "stop",
    "stop": "stop",
    "eos": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "abort",
    "abort": "abort",
}


class OpenAIChatBackend:
    """A :class:`hermes_protocols.ChatBackend` for any OpenAI-compatible server.

    Use it as an async context manager (it owns an HTTP connection pool)::

        async with OpenAIChatBackend("https://openrouter.ai/api/v1", model="x", api_key=k) as b:
            result = await b.chat(messages, tools=tools, sampling=SamplingParams())
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        extra_body: JSONObject | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self.extra_body = dict(extra_body or {})
        self._http = JSONPoster(
            base_url, api_key=api_key, timeout_s=timeout_s, retry=retry, client=client
        )

    async def __aenter__(self) -> OpenAIChatBackend:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def request_body(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        sampling: SamplingParams,
        n: int = 1,
        extra_body: JSONObject | None = None,
    ) -> JSONObject:
        """The JSON body :meth:`chat` sends (useful for logging and tests)."""
        body: JSONObject = {
            "model": self.model,
            "messages": messages_to_openai(messages),
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "n": n,
        }
        if tools:
            body["tools"] = tools_to_openai(tools)
        if sampling.top_k > 0:
            body["top_k"] = sampling.top_k
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        body.update(self.extra_body)
        body.update(extra_body or {})
        return body

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        sampling: SamplingParams,
        n: int = 1,
        extra_body: JSONObject | None = None,
    ) -> ChatResult:
        body = self.request_body(
            messages, tools=tools, sampling=sampling, n=n, extra_body=extra_body
        )
        data = await self._http.post("/chat/completions", body)
        return parse_chat_response(data)


def parse_chat_response(data: Mapping[str, Any]) -> ChatResult:
    """An OpenAI chat-completions response as a :class:`ChatResult`."""
    where = "chat completion"
    choices_raw = require(data, "choices", list, where)
    if not choices_raw:
        raise BackendError(f"{where}: the server returned no choices")
    choices = [_choice(raw, index) for index, raw in enumerate(choices_raw)]
    usage_raw = data.get("usage") or {}
    usage = Usage(
        prompt_tokens=int(usage_raw.get("prompt_tokens") or 0),
        completion_tokens=int(usage_raw.get("completion_tokens") or 0),
    )
    return ChatResult(choices=choices, usage=usage)


def _choice(raw: Any, index: int) -> ChatChoice:
    where = f"chat completion choices[{index}]"
    if not isinstance(raw, dict):
        raise BackendError(f"{where} is not an object")
    message_raw = dict(require(raw, "message", dict, where))
    message_raw.setdefault("role", "assistant")
    try:
        message = message_from_openai(message_raw)
    except ConversionError as exc:
        raise BackendError(f"{where}: {exc}") from exc
    if message.reasoning is None:
        details = _reasoning_details(message_raw.get("reasoning_details"))
        if details:
            message = Message.assistant(message.content, message.tool_calls, reasoning=details)
    finish = raw.get("finish_reason")
    return ChatChoice(message=message, finish_reason=_FINISH.get(finish, "stop"))


def _reasoning_details(details: Any) -> str | None:
    """Readable text of OpenRouter-style ``reasoning_details`` (encrypted parts are skipped)."""
    if not isinstance(details, list):
        return None
    parts = []
    for item in details:
        if isinstance(item, dict):
            text = item.get("text") or item.get("summary")
            if isinstance(text, str) and text:
                parts.append(text)
    return "\n".join(parts) or None
