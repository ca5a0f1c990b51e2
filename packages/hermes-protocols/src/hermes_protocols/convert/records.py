"""A cattrs converter for hermes value types as plain JSON (results, rollouts, traces).

Messages inside records use the OpenAI chat JSON shape, so a record's ``messages`` field is
directly usable as a chat-completions request.
"""

from __future__ import annotations

from typing import Any

import cattrs

from hermes_protocols.convert.openai import message_from_openai, message_to_openai
from hermes_protocols.messages import Message


def _structure_message(data: Any, _type: object) -> Message:
    return message_from_openai(data)


def record_converter() -> cattrs.Converter:
    """A new converter for hermes attrs types <-> JSON-compatible dicts."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_unstructure_hook(Message, message_to_openai)
    converter.register_structure_hook(Message, _structure_message)
    return converter
