"""Jinja chat templates with Hugging Face ``chat_template`` semantics.

A template string (from ``tokenizer_config.json``, a GGUF's ``tokenizer.chat_template``, or
your own) is rendered with ``messages`` (OpenAI-style dicts), ``tools`` (OpenAI function
schemas), ``add_generation_prompt``, ``bos_token``, ``eos_token`` and ``raise_exception``, in a
sandboxed Jinja environment with ``trim_blocks`` and ``lstrip_blocks``, as transformers does.

Templates that never mention ``tools`` get the Hermes fallback: the tool schemas are written into
the system prompt inside ``<tools></tools>``, the model is told to answer with
``<tool_call>{"name": ..., "arguments": ...}</tool_call>``, assistant tool calls are rendered in
that form and tool results are wrapped in ``<tool_response></tool_response>``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import jinja2
import jinja2.meta
from hermes_protocols import ConfigError, JSONObject, Message, ToolSchema
from hermes_protocols.convert import messages_to_openai, tools_to_openai
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERMES_TOOLS_PREAMBLE = (
    "You are a function calling AI model. You are given function signatures inside "
    "<tools></tools> XML tags. You may call one or more functions to help with the user's "
    "request. Do not guess values for function arguments. Here are the available tools: <tools>"
)
HERMES_TOOLS_INSTRUCTIONS = (
    "</tools> For each function call, return a JSON object with the function name and "
    "arguments inside <tool_call></tool_call> XML tags, like this:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


class ChatTemplateError(ConfigError):
    """The chat template failed to render (syntax error or ``raise_exception`` in the template)."""


def _raise_exception(message: str) -> NoReturn:
    raise ChatTemplateError(f"chat template refused the conversation: {message}")


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return dt.datetime.now().strftime(fmt)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _arguments_object(arguments: str) -> Any:
    """HF templates expect ``arguments`` as an object; keep the text when it is not JSON."""
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def hermes_tools_system_prompt(tools: Sequence[ToolSchema]) -> str:
    """The Hermes-format tool block written into the system prompt by the fallback."""
    specs = " ".join(json.dumps(spec, ensure_ascii=False) for spec in tools_to_openai(tools))
    return f"{HERMES_TOOLS_PREAMBLE} {specs} {HERMES_TOOLS_INSTRUCTIONS}"


def hermes_tool_call_text(name: str, arguments: str) -> str:
    """One tool call as a Hermes-format model would emit it."""
    body = json.dumps({"name": name, "arguments": _arguments_object(arguments)}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


class JinjaChatTemplate:
    """A :class:`hermes_protocols.ChatTemplate` backed by a Jinja template string.

    ``tool_fallback`` forces (``True``) or disables (``False``) the Hermes fallback; by default it
    is used exactly when the template never references ``tools``. ``fallback_tool_role`` is the
    role tool results get under the fallback. ``extra_context`` is passed to every render
    (e.g. ``{"enable_thinking": False}``).
    """

    def __init__(
        self,
        source: str,
        *,
        bos_token: str = "",
        eos_token: str = "",
        tool_fallback: bool | None = None,
        fallback_tool_role: str = "tool",
        extra_context: Mapping[str, Any] | None = None,
    ) -> None:
        env = _environment()
        try:
            parsed = env.parse(source)
            self._template = env.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise ChatTemplateError(f"chat template does not compile: {exc}") from exc
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.supports_tools = "tools" in jinja2.meta.find_undeclared_variables(parsed)
        self.tool_fallback = (not self.supports_tools) if tool_fallback is None else tool_fallback
        self.fallback_tool_role = fallback_tool_role
        self._extra = dict(extra_context or {})

    def render(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema] = (),
        add_generation_prompt: bool = False,
    ) -> str:
        if self.tool_fallback:
            return self.render_openai(
                self._fallback_messages(messages, tools),
                tools=None,
                add_generation_prompt=add_generation_prompt,
            )
        return self.render_openai(
            [self._hf_message(m) for m in messages],
            tools=tools_to_openai(tools) if tools else None,
            add_generation_prompt=add_generation_prompt,
        )

    def render_openai(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = False,
    ) -> str:
        """Render OpenAI-style message dicts as they are (no fallback, no conversion)."""
        context: dict[str, Any] = {
            **self._extra,
            "messages": list(messages),
            "tools": list(tools) if tools is not None else None,
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
        }
        try:
            return self._template.render(**context)
        except ChatTemplateError:
            raise
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(f"chat template failed to render: {exc}") from exc
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            raise ChatTemplateError(
                f"chat template failed to render ({type(exc).__name__}: {exc}); the messages "
                "do not have the shape this template expects"
            ) from exc

    @staticmethod
    def _hf_message(message: Message) -> JSONObject:
        (data,) = messages_to_openai([message])
        for call in data.get("tool_calls", ()):
            function = call["function"]
            function["arguments"] = _arguments_object(function["arguments"])
        return data

    def _fallback_messages(
        self, messages: Sequence[Message], tools: Sequence[ToolSchema]
    ) -> list[JSONObject]:
        out: list[JSONObject] = []
        for message in messages:
            if message.role == "assistant":
                parts = [message.content] if message.content else []
                parts += [hermes_tool_call_text(c.name, c.arguments) for c in message.tool_calls]
                out.append({"role": "assistant", "content": "\n".join(parts)})
            elif message.role == "tool":
                content = f"<tool_response>\n{message.content or ''}\n</tool_response>"
                out.append({"role": self.fallback_tool_role, "content": content})
            else:
                out.append({"role": message.role, "content": message.content or ""})
        if tools:
            block = hermes_tools_system_prompt(tools)
            if out and out[0]["role"] == "system":
                out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{block}"}
            else:
                out.insert(0, {"role": "system", "content": block})
        return out
