"""Phase 1: notice a server that ignores ``tools``, and the explicit client-side fallback.

Some servers never put the tool schemas into the prompt or never parse the model's calls
(llama-server with a chat template that drops ``tools``): every reply is plain ``content``,
often holding a well-formed call in the model's own markup, and each rollout silently ends as a
final answer. :class:`IgnoredToolsCheck` watches a run's replies and warns once when ``turns``
replies in a row offered tools, came back without tool calls and held the parser's tool-call
markup, while the server never returned a tool call. With ``parse_content`` the parser reads
tool calls from such ``content`` client-side (the user's explicit choice, never a default).

A model that writes no markup at all gives that check nothing to see:
:func:`check_tools_reach_prompt` asks the server twice for one token, with and without the
tools, and warns when ``usage.prompt_tokens`` is the same (the schemas never reached the prompt).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from hermes_protocols import (
    ChatBackend,
    JSONObject,
    Message,
    ParsedTurn,
    SamplingParams,
    ToolCallParser,
    ToolSchema,
)

_log = logging.getLogger("hermes_loop.ignored_tools")

#: replies in a row with tool-call markup in ``content`` and no tool call before the warning
DEFAULT_TURNS = 3


class IgnoredToolsCheck:
    """Per run (one per :class:`hermes_loop.ChatModel`): counts, warns once, parses if asked."""

    def __init__(
        self, parser: ToolCallParser, *, parse_content: bool = False, turns: int = DEFAULT_TURNS
    ) -> None:
        self.parser = parser
        self.parse_content = parse_content
        self.turns = turns
        self.markup_replies = 0
        self.server_called = False
        self.warned = False

    def observe(self, message: Message, tools: list[JSONObject]) -> ParsedTurn | None:
        """Look at one reply to a request that offered ``tools``; return the client-side parse
        of its content when ``parse_content`` is on and the content holds tool-call markup."""
        if message.tool_calls:
            self.server_called = True
            self.markup_replies = 0
            return None
        if not message.content:
            return None
        parsed = self.parser.parse(message.content, tools=tools)
        if not (parsed.tool_calls or parsed.errors):
            self.markup_replies = 0
            return None
        self.markup_replies += 1
        if not self.server_called and self.markup_replies >= self.turns and not self.warned:
            self.warned = True
            action = (
                "tool calls are parsed from content client-side (parse_content is on)"
                if self.parse_content
                else "the rollouts end as final answers; enable client-side parsing of content "
                "with the run's --parser (parse_content_tool_calls) or use a template that "
                "renders tools"
            )
            _log.warning(
                "the chat server evidently ignores `tools`: %d replies in a row returned no tool "
                "call while their content held %s tool-call markup; %s",
                self.markup_replies,
                type(self.parser).__name__,
                action,
            )
        return parsed if self.parse_content else None


#: the probe conversation of :func:`check_tools_reach_prompt`
_PROBE = (Message.user("Say OK."),)


async def check_tools_reach_prompt(
    backend: ChatBackend, tools: Sequence[ToolSchema], *, extra_body: JSONObject | None = None
) -> bool | None:
    """Whether the server puts ``tools`` into the prompt: two one-token requests, with and
    without them; ``False`` (and one warning) when both count the same ``prompt_tokens`` and
    the reply made no tool call, ``None`` when the server reports no usage."""
    sampling = SamplingParams(temperature=0.0, max_tokens=1, seed=0)
    offered = await backend.chat(_PROBE, tools=tools, sampling=sampling, extra_body=extra_body)
    bare = await backend.chat(_PROBE, tools=(), sampling=sampling, extra_body=extra_body)
    counted = offered.usage.prompt_tokens
    if counted <= 0 or bare.usage.prompt_tokens <= 0:
        return None
    if counted != bare.usage.prompt_tokens or offered.choices[0].message.tool_calls:
        return True
    _log.warning(
        "the chat server drops `tools`: a request offering %d tools counts the same %d prompt "
        "tokens as one without, so the model never sees them; serve a chat template that "
        "renders tools (llama-server: --jinja, with --chat-template-file if the model's own "
        "template has no tools)",
        len(tools),
        counted,
    )
    return False
