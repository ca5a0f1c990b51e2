"""Converters between hermes value types and wire formats (OpenAI chat JSON, ShareGPT)."""

from hermes_protocols.convert.openai import (
    message_from_openai,
    message_to_openai,
    messages_from_openai,
    messages_to_openai,
    tools_from_openai,
    tools_to_openai,
)
from hermes_protocols.convert.records import record_converter
from hermes_protocols.convert.sharegpt import from_sharegpt, to_sharegpt

__all__ = [
    "from_sharegpt",
    "message_from_openai",
    "message_to_openai",
    "messages_from_openai",
    "messages_to_openai",
    "record_converter",
    "to_sharegpt",
    "tools_from_openai",
    "tools_to_openai",
]
