"""hermes-parsers: tool-call parsing and exact rendering for every major model family.

``get_parser(name)`` returns a ``hermes_protocols.ToolCallParser``: ``parse(text, tools=...)``
never raises and reports malformed calls as ``ToolParseError`` entries, ``render(...)`` writes
the exact text the model family emits, ``stream()`` parses incrementally.
"""

from hermes_parsers._delimited import DelimitedParser
from hermes_parsers._spec import FormatSpec
from hermes_parsers.errors import RenderError, UnknownParserError
from hermes_parsers.formats.harmony import HarmonyParser
from hermes_parsers.formats.llama import Llama3JsonParser
from hermes_parsers.formats.pythonic import PythonicParser
from hermes_parsers.registry import ALIASES, get_parser, list_parsers

__all__ = [
    "ALIASES",
    "DelimitedParser",
    "FormatSpec",
    "HarmonyParser",
    "Llama3JsonParser",
    "PythonicParser",
    "RenderError",
    "UnknownParserError",
    "get_parser",
    "list_parsers",
]
