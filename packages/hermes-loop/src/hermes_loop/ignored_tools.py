"""Phase 1: notice a server that ignores ``tools``, and the explicit client-side fallback.

Some servers never put the tool schemas into the prompt or never parse the model's calls
(llama-server with a chat template that drops ``tools``): every reply is plain ``content``,
often holding a well-formed call in the model's own markup, and each rollout silently ends as a
final answer. :class:`IgnoredToolsCheck` watches a run's replies and warns once when ``turns``
replies in a row offered tools, came back without tool calls and held the parser's tool-call
markup, while the server never returned a tool call. With ``parse_content`` the parser reads
tool calls from such ``content`` client-side (the user's explicit choice, never a default).
"""

from __future__ import annotations

import logging

from hermes_protocols import JSONObject, Message, ParsedTurn, ToolCallParser

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
