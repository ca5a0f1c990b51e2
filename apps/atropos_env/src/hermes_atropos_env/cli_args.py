"""``--env.*`` / ``--openai.*`` / ``--config file.yaml`` parsing into explicit config objects.

Precedence is atroposlib's: command line > YAML file > per-command defaults > class defaults.
Unknown names fail with the closest valid names.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml  # type: ignore[import-untyped]
from hermes_protocols import ConfigError, json_error
from pydantic import BaseModel, ValidationError

from hermes_atropos_env.config import HermesAtroposEnvConfig, InferenceConfig

NAMESPACES = ("env", "openai")


@attrs.frozen(slots=True)
class ParsedArgs:
    """The command, its raw namespaced overrides (CLI over YAML) and which keys were given."""

    command: str
    env: dict[str, Any]
    openai: dict[str, Any]
    config_path: str | None = None


def _is_list_field(model: type[BaseModel], name: str) -> bool:
    return "list" in str(model.model_fields[name].annotation)


def _cli_value(model: type[BaseModel], namespace: str, name: str, raw: str) -> Any:
    text = raw.strip()
    if text.lower() in ("null", "none"):
        return None
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"--{namespace}.{name}: {raw!r} is not valid JSON ({json_error(exc)}): quote it "
                'for the shell, e.g. --env.x \'["a", "b"]\''
            ) from exc
    if _is_list_field(model, name):
        return [part.strip() for part in text.split(",") if part.strip()]
    return raw


def _check_names(model: type[BaseModel], namespace: str, values: Mapping[str, Any]) -> None:
    for name in values:
        if name not in model.model_fields:
            close = difflib.get_close_matches(name, list(model.model_fields), n=3)
            hint = (
                f"; did you mean {', '.join(f'--{namespace}.{c}' for c in close)}?" if close else ""
            )
            raise ConfigError(f"unknown option --{namespace}.{name}{hint}")


def _load_yaml(path: str) -> Any:
    """The ``--config`` file's content; a missing or malformed file is a :class:`ConfigError`
    naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigError(f"cannot read --config {path}: {reason}") from exc
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise ConfigError(
            f"--config {path} is not valid YAML{line}: {getattr(exc, 'problem', None) or exc}"
        ) from exc


def parse_argv(argv: Sequence[str], commands: Sequence[str]) -> ParsedArgs:
    """Split ``COMMAND [--env.x v] [--openai.y v] [--config f]`` (``--a=b`` also accepted)."""
    if not argv or argv[0] not in commands:
        raise ConfigError(f"first argument must be one of {', '.join(commands)}")
    command, rest = argv[0], list(argv[1:])
    flags: dict[str, dict[str, str]] = {ns: {} for ns in NAMESPACES}
    config_path: str | None = None
    index = 0
    while index < len(rest):
        token = rest[index]
        if not token.startswith("--"):
            raise ConfigError(f"unexpected argument {token!r}: options look like --env.name value")
        key, has_value, value = token[2:].partition("=")
        if not has_value:
            if index + 1 < len(rest) and not rest[index + 1].startswith("--"):
                value = rest[index + 1]
                index += 1
            else:
                value = "true"
        index += 1
        if key == "config":
            config_path = value
            continue
        namespace, dot, name = key.partition(".")
        if not dot or namespace not in NAMESPACES:
            raise ConfigError(f"unknown option --{key}: use --env.NAME, --openai.NAME or --config")
        flags[namespace][name] = value
    yaml_config: dict[str, Any] = {}
    if config_path is not None:
        loaded = _load_yaml(config_path)
        if not isinstance(loaded, dict):
            raise ConfigError(f"{config_path}: expected a mapping with env: and openai: keys")
        yaml_config = loaded
    yaml_openai = yaml_config.get("openai") or {}
    if isinstance(yaml_openai, list):
        if len(yaml_openai) != 1:
            raise ConfigError(f"{config_path}: openai: must be one server (a mapping)")
        yaml_openai = yaml_openai[0]
    env = dict(yaml_config.get("env") or {})
    openai = dict(yaml_openai)
    env.update(
        {
            k: _cli_value(HermesAtroposEnvConfig, "env", k, v)
            for k, v in flags["env"].items()
            if k in HermesAtroposEnvConfig.model_fields
        }
    )
    _check_names(HermesAtroposEnvConfig, "env", {**flags["env"], **env})
    _check_names(InferenceConfig, "openai", {**flags["openai"], **openai})
    openai.update(
        {k: _cli_value(InferenceConfig, "openai", k, v) for k, v in flags["openai"].items()}
    )
    return ParsedArgs(command=command, env=env, openai=openai, config_path=config_path)


def _validated(model: type[BaseModel], namespace: str, values: Mapping[str, Any]) -> Any:
    try:
        return model(**values)
    except ValidationError as exc:
        lines = [
            f"--{namespace}.{'.'.join(str(p) for p in err['loc'])}: {err['msg']} "
            f"(got {err.get('input')!r})"
            for err in exc.errors()
        ]
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(lines)) from exc


def build_configs(
    parsed: ParsedArgs, command_defaults: Mapping[str, Any]
) -> tuple[HermesAtroposEnvConfig, InferenceConfig]:
    """Validate the merged values into config objects; pydantic errors become ConfigError."""
    env: HermesAtroposEnvConfig = _validated(
        HermesAtroposEnvConfig, "env", {**command_defaults, **parsed.env}
    )
    inference: InferenceConfig = _validated(InferenceConfig, "openai", parsed.openai)
    return env, inference
