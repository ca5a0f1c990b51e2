"""The ids that end an assistant turn, for token backends over HTTP.

An engine stops on every end-of-generation id of its vocabulary (SmolLM2: ``<|endoftext|>``,
``<|im_end|>`` and ``<|endofprompt|>``), not only on the tokenizer's EOS. The ledger must know
all of them: a generation ending in one is stripped before parsing and bridged as the end of
the turn. Sources, in order: an explicit override; the server (llama-server); the Hugging Face
tokenizer directory (``eos_token_id`` of the tokenizer, ``generation_config.json`` and
``config.json``, each an id or a list); always with the template's end-of-turn token.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hermes_protocols import ChatTemplate, ConfigError, Tokenizer

from hermes_loop.ledger import TemplateBridge, default_end_token_ids


def _ids(value: Any) -> set[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return {value}
    if isinstance(value, list):
        return {v for v in value if isinstance(v, int) and not isinstance(v, bool)}
    return set()


def directory_end_ids(directory: str | Path) -> frozenset[int]:
    """``eos_token_id`` (an id or a list) of ``generation_config.json`` and ``config.json`` in
    a Hugging Face model or tokenizer directory; empty when neither file declares one."""
    found: set[int] = set()
    for name in ("generation_config.json", "config.json"):
        path = Path(directory) / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from exc
        if isinstance(data, dict):
            found |= _ids(data.get("eos_token_id"))
    return frozenset(found)


def template_end_ids(tokenizer: Tokenizer, template: ChatTemplate) -> frozenset[int]:
    """The tokenizer's EOS and the template's end-of-turn token (``<|im_end|>`` for ChatML)."""
    return default_end_token_ids(tokenizer, TemplateBridge(template).turn_end)


def resolve_end_ids(
    tokenizer: Tokenizer,
    template: ChatTemplate,
    *,
    override: Iterable[int] | None = None,
    server: Iterable[int] = (),
    directory: str | Path | None = None,
) -> frozenset[int]:
    """``override`` when given (exactly those ids); otherwise the union of the server's ids,
    the directory's and :func:`template_end_ids`."""
    if override is not None:
        ids = frozenset(override)
        if not ids:
            raise ConfigError("the end-token-id override is empty; give at least one id")
        return ids
    found = set(server) | set(template_end_ids(tokenizer, template))
    if directory is not None:
        found |= directory_end_ids(directory)
    return frozenset(found)
