"""An environment whose system prompt is replaced (``--system-prompt`` of the apps)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from hermes_protocols import Environment, Item, Message

from hermes_envs._wrapped import WrappedEnvironment


@attrs.frozen(slots=True)
class SystemPromptOverride(WrappedEnvironment):
    """``inner`` with its system message(s) replaced by one ``system_prompt`` message.

    Everything else (name, toolsets, items, workspace setup, verification) is ``inner``'s.
    """

    system_prompt: str

    def prompt(self, item: Item) -> Sequence[Message]:
        rest = [m for m in self.inner.prompt(item) if m.role != "system"]
        return [Message.system(self.system_prompt), *rest]


def with_system_prompt(environment: Environment, system_prompt: str | None) -> Environment:
    """``environment`` itself when ``system_prompt`` is empty, else the override."""
    if not system_prompt:
        return environment
    return SystemPromptOverride(environment, system_prompt)
