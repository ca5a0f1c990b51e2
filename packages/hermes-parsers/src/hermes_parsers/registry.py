"""Parsers by name (the names vLLM and SGLang use, plus aliases)."""

from __future__ import annotations

from collections.abc import Callable

from hermes_protocols.parsing import ToolCallParser

from hermes_parsers._delimited import DelimitedParser
from hermes_parsers._spec import FormatSpec
from hermes_parsers.errors import UnknownParserError
from hermes_parsers.formats.deepseek import DEEPSEEK_V3, DEEPSEEK_V31
from hermes_parsers.formats.dsml import DEEPSEEK_V32
from hermes_parsers.formats.glm import GLM45, GLM47
from hermes_parsers.formats.harmony import HarmonyParser
from hermes_parsers.formats.hermes import HERMES, LONGCAT
from hermes_parsers.formats.kimi import KIMI_K2
from hermes_parsers.formats.llama import Llama3JsonParser
from hermes_parsers.formats.mistral import MISTRAL, MISTRAL_PRE_V11
from hermes_parsers.formats.pythonic import PythonicParser
from hermes_parsers.formats.qwen3_coder import QWEN3_CODER

_DELIMITED: dict[str, FormatSpec] = {
    spec.name: spec
    for spec in (
        HERMES,
        LONGCAT,
        MISTRAL,
        MISTRAL_PRE_V11,
        QWEN3_CODER,
        DEEPSEEK_V3,
        DEEPSEEK_V31,
        DEEPSEEK_V32,
        KIMI_K2,
        GLM45,
        GLM47,
    )
}
_WHOLE: dict[str, Callable[[], ToolCallParser]] = {
    "llama3_json": lambda: Llama3JsonParser("llama3_json"),
    "llama4_json": lambda: Llama3JsonParser("llama4_json"),
    "pythonic": PythonicParser,
    "gpt_oss": HarmonyParser,
}
ALIASES: dict[str, str] = {
    "qwen": "hermes",
    "qwen2_5": "hermes",
    "qwen3": "hermes",
    "deepseek_v4": "deepseek_v32",
    "harmony": "gpt_oss",
    "llama4_pythonic": "pythonic",
}


def list_parsers() -> list[str]:
    """Every registered parser name, aliases included, sorted."""
    return sorted([*_DELIMITED, *_WHOLE, *ALIASES])


def get_parser(
    name: str, *, reasoning_open: bool = False, stream_batch: int = 256
) -> ToolCallParser:
    """The parser registered under ``name`` (an alias resolves to its format).

    ``reasoning_open=True``: the prompt already opened the reasoning block (a template that
    ends the prompt with ``<think>``), so the output starts inside reasoning.
    ``stream_batch``: streams examine queued text once this many characters arrived (1 gives
    events after every chunk; whole-output formats wait for the end of text regardless).
    """
    target = ALIASES.get(name, name)
    spec = _DELIMITED.get(target)
    if spec is not None:
        return DelimitedParser(spec, reasoning_open=reasoning_open, stream_batch=stream_batch)
    factory = _WHOLE.get(target)
    if factory is None:
        valid = ", ".join(list_parsers())
        raise UnknownParserError(f"unknown tool-call parser {name!r}; valid names: {valid}")
    if reasoning_open:
        raise UnknownParserError(f"parser {name!r} has no reasoning block to start inside")
    return factory()
