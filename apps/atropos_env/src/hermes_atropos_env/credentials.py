"""Credentials (never configuration): is a wandb key or a Modal token available. The sandbox
tokens are :class:`hermes_rollouts.Credentials`."""

from __future__ import annotations

import netrc
from collections.abc import Mapping
from pathlib import Path


def wandb_key_configured(environ: Mapping[str, str], home: Path) -> bool:
    """True when wandb can log in: ``WANDB_API_KEY`` or an ``api.wandb.ai`` netrc entry."""
    if environ.get("WANDB_API_KEY"):
        return True
    netrc_path = home / ".netrc"
    if not netrc_path.is_file():
        return False
    try:
        return netrc.netrc(str(netrc_path)).authenticators("api.wandb.ai") is not None
    except (netrc.NetrcParseError, OSError):
        return False


def modal_credentials_configured(environ: Mapping[str, str], home: Path) -> bool:
    """True when the Modal SDK can authenticate: both ``MODAL_TOKEN_ID`` and
    ``MODAL_TOKEN_SECRET``, or a token in the Modal config file (``~/.modal.toml`` or
    ``MODAL_CONFIG_PATH``)."""
    if environ.get("MODAL_TOKEN_ID") and environ.get("MODAL_TOKEN_SECRET"):
        return True
    config_path = Path(environ.get("MODAL_CONFIG_PATH", str(home / ".modal.toml")))
    try:
        text = config_path.read_text(encoding="utf-8")
    except OSError:
        return False
    return "token_id" in text and "token_secret" in text
