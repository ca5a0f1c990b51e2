"""gpt-oss harmony: messages ``<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>json]<|message|>
BODY<|end|>`` (later ones prefixed with ``<|start|>assistant``). ``analysis`` is reasoning,
``final`` (or ``commentary`` without recipient) is content, ``commentary to=functions.NAME``
is a call ending with ``<|call|>``. The output starts after the prompt's ``<|start|>assistant``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hermes_protocols.parsing import ParsedToolCall, ParsedTurn, ToolParseError

from hermes_parsers._buffered import BufferedParser
from hermes_parsers._spec import BodyError, Schemas
from hermes_parsers.errors import RenderError
from hermes_parsers.formats._common import (
    arguments_text,
    check_name,
    check_text,
    json_arguments_call,
)

START, CHANNEL, MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
END, CALL, RETURN, CONSTRAIN = "<|end|>", "<|call|>", "<|return|>", "<|constrain|>"
_SPECIAL = (START, CHANNEL, MESSAGE, END, CALL, RETURN, CONSTRAIN)
_TERMINATOR = re.compile(r"<\|(?:end|call|return)\|>")
_RECIPIENT = re.compile(r"\bto=(\S+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")


class HarmonyParser(BufferedParser):
    name = "gpt_oss"

    def _decide(self, head: str) -> bool | None:
        return False

    def _parse(self, text: str, schemas: Schemas) -> ParsedTurn:
        content: list[str] = []
        reasoning: list[str] | None = None
        calls: list[ParsedToolCall] = []
        errors: list[ToolParseError] = []
        i = 0
        while i < len(text):
            start = i
            body_at = text.find(MESSAGE, i)
            if body_at < 0:
                if text[i:].strip():
                    content.append(text[i:])
                break
            header = text[i:body_at]
            body_at += len(MESSAGE)
            term = _TERMINATOR.search(text, body_at)
            body_end = term.start() if term else len(text)
            i = term.end() if term else len(text)
            body = text[body_at:body_end]
            channel_match = _CHANNEL.search(header)
            channel = channel_match[1] if channel_match else ""
            recipient = _RECIPIENT.search(header)
            if recipient:
                target = recipient[1]
                name = target[len("functions.") :] if target.startswith("functions.") else target
                item = json_arguments_call(name, body)
                index = len(calls) + len(errors)
                if isinstance(item, BodyError):
                    errors.append(
                        ToolParseError(item.kind, item.message, index, start, i, name, body)
                    )
                else:
                    calls.append(item)
            elif channel == "analysis":
                reasoning = (reasoning or []) + [body]
            else:
                content.append(body)
        joined = "".join(content)
        return ParsedTurn(
            content=joined or None,
            reasoning=None if reasoning is None else "".join(reasoning),
            tool_calls=calls,
            errors=errors,
        )

    def render(
        self,
        *,
        content: str | None = None,
        tool_calls: Sequence[ParsedToolCall] = (),
        reasoning: str | None = None,
    ) -> str:
        messages: list[str] = []
        if reasoning is not None:
            check_text("reasoning", reasoning, _SPECIAL, self.name)
            messages.append(f"{CHANNEL}analysis{MESSAGE}{reasoning}{END}")
        if content:
            check_text("content", content, _SPECIAL, self.name)
            if tool_calls:
                messages.append(f"{CHANNEL}commentary{MESSAGE}{content}{END}")
            else:
                messages.append(f"{CHANNEL}final{MESSAGE}{content}{RETURN}")
        for call in tool_calls:
            check_name(call.name, (*_SPECIAL, " ", "\n", "\t"), self.name)
            args = arguments_text(call)
            if call.arguments is None:
                check_text("arguments", args, _SPECIAL, self.name)
            elif any(m in args for m in (END, CALL, RETURN)):
                raise RenderError("gpt_oss arguments cannot contain harmony stop tokens")
            messages.append(
                f"{CHANNEL}commentary to=functions.{call.name} {CONSTRAIN}json{MESSAGE}{args}{CALL}"
            )
        return f"{START}assistant".join(messages)
