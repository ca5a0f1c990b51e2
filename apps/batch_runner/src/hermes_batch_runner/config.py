"""The resolved configuration of a run: defaults < config file < command line.

``RunConfig`` is what ``run.json`` records. Keys in :data:`RUNTIME_KEYS` may change between a
run and its resume (they do not change what a rollout produces); every other key must match.
The API key is never part of the config: it comes from ``--api-key`` or the environment and is
never written to disk.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs
import cattrs
import yaml  # type: ignore[import-untyped]
from hermes_protocols import ConfigError, JSONObject
from hermes_rollouts import (
    BACKEND_KINDS,
    SERVER_TYPES,
    BackendKind,
    PoolSpec,
    ServerType,
    default_prefill,
    default_toolsets,
)
from hermes_rollouts import option_defaults as defaults

from hermes_batch_runner.errors import ResumeMismatch

SandboxName: TypeAlias = BackendKind
SANDBOXES: tuple[str, ...] = BACKEND_KINDS
DEFAULT_ENV_ITEMS = 4  # items of an environment when --num-items is not given

#: Keys that may differ between a run and its resume.
RUNTIME_KEYS: frozenset[str] = frozenset(
    {"concurrency", "output", "progress", "drain_timeout", "on_bad_line"}
)


def _flag(attribute: attrs.Attribute[Any]) -> str:
    """The command-line option of a field (``concurrency`` -> ``--concurrency``)."""
    return f"--{attribute.name.replace('_', '-')}"


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{_flag(attribute)} must be > 0, got {value}: pass a positive number")


def _non_negative(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if value < 0:
        raise ConfigError(f"{_flag(attribute)} must be >= 0, got {value}: pass 0 or more")


def _one_of(choices: tuple[str, ...]) -> Any:
    def check(_inst: object, attribute: attrs.Attribute[Any], value: str) -> None:
        if value not in choices:
            raise ConfigError(
                f"{_flag(attribute)} must be one of {', '.join(choices)}; got {value!r}"
            )

    return check


def _strs(values: Any) -> tuple[str, ...]:
    if isinstance(values, str):
        values = [v for v in values.split(",") if v]
    return tuple(str(v) for v in values)


def _aliases(_inst: object, _attribute: attrs.Attribute[Any], values: tuple[str, ...]) -> None:
    bad = [v for v in values if not all(v.partition("=")[::2])]
    if bad:
        raise ConfigError(
            f"--sandbox-image-alias takes NAME=IMAGE (e.g. ubuntu:24.04=my-local:1), not {bad[0]!r}"
        )


def _ids_or_none(values: Any) -> tuple[int, ...] | None:
    if values is None:
        return None
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    try:
        return tuple(int(v) for v in values)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"--end-token-ids takes integer ids (0,2,4), not {values!r}") from exc


@attrs.frozen(slots=True, kw_only=True)
class RunConfig:
    """Every option of a batch run (see ``--help`` for each one's meaning)."""

    env: str = defaults.ENVIRONMENT.value
    env_options: JSONObject | None = None
    dataset: str | None = None
    on_bad_line: Literal["skip", "fail"] = attrs.field(
        default="fail", validator=_one_of(("skip", "fail"))
    )
    num_items: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_positive)
    )
    group_size: int = attrs.field(default=1, validator=_positive)
    concurrency: int = attrs.field(default=4, validator=_positive)
    max_turns: int = defaults.MAX_TURNS.value
    max_tokens: int = defaults.MAX_TOKENS.value
    temperature: float = defaults.TEMPERATURE.value
    system_prompt: str | None = None
    prefill_messages: str | None = None
    toolsets: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    disabled_toolsets: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    distribution: str | None = None
    parser: str = defaults.PARSER.value
    sandbox: SandboxName = attrs.field(default=defaults.SANDBOX.value, validator=_one_of(SANDBOXES))
    sandbox_slots: int = defaults.SANDBOX_SLOTS.value
    sandbox_max_hosts: int = 1
    sandbox_image: str | None = None
    sandbox_image_alias: tuple[str, ...] = attrs.field(
        default=(), converter=_strs, validator=_aliases
    )
    sandbox_url: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    sandbox_allow_network: bool = False
    nomad_address: str | None = None
    ray_address: str | None = None
    ray_python: str | None = None
    command_timeout: float = defaults.COMMAND_TIMEOUT.value
    rollout_timeout: float = attrs.field(
        default=defaults.ROLLOUT_TIMEOUT.value, validator=_positive
    )
    model_url: str | None = None
    model: str | None = None
    tokenizer: str | None = None
    context_tokens: int = defaults.CONTEXT_TOKENS.value
    threads: int | None = None
    server_type: ServerType = attrs.field(default="embedded", validator=_one_of(SERVER_TYPES))
    extra_body: JSONObject | None = None
    end_token_ids: tuple[int, ...] | None = attrs.field(default=None, converter=_ids_or_none)
    server_logprob_mode: Literal["sampled", "raw"] | None = attrs.field(
        default=None, validator=attrs.validators.optional(_one_of(("sampled", "raw")))
    )
    parse_content_tool_calls: bool = False
    seed: int = defaults.SEED.value
    output: str | None = None
    require_reasoning: bool = False
    min_reward: float | None = None
    drain_timeout: float = attrs.field(default=30.0, validator=_non_negative)
    progress: bool = True

    @property
    def enabled_toolsets(self) -> tuple[str, ...] | None:
        """``--toolsets``; else terminal only for the embedded model on an environment; else
        ``None``: the environment's own toolsets (or ``--distribution``)."""
        return default_toolsets(
            self.toolsets,
            embedded=self.server_type == "embedded",
            distribution=self.distribution,
            dataset=self.dataset is not None,
        )

    @property
    def prefill_file(self) -> str | None:
        """``--prefill-messages`` (``none`` = off); by default the shipped terminal
        demonstration when the embedded model runs an environment with the terminal tool."""
        return default_prefill(
            self.prefill_messages,
            embedded=self.server_type == "embedded",
            enabled=self.enabled_toolsets,
            dataset=self.dataset is not None,
        )

    @property
    def in_flight(self) -> int:
        """Rollouts run at once: ``--concurrency``, capped by the pool's slots so no rollout
        waits for a slot long enough to hit the acquire timeout."""
        pool = PoolSpec(slots_per_host=self.sandbox_slots, max_hosts=self.sandbox_max_hosts)
        return min(self.concurrency, pool.capacity)

    @property
    def item_limit(self) -> int | None:
        """How many items to run: ``num_items``, else all of a dataset or a few env items."""
        if self.num_items is not None:
            return self.num_items
        return None if self.dataset else DEFAULT_ENV_ITEMS

    @property
    def source(self) -> str:
        """What items come from: ``dataset:<file>`` or ``env:<name>``."""
        return f"dataset:{self.dataset}" if self.dataset else f"env:{self.env}"


def _converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook_func(lambda t: t == tuple[str, ...], lambda v, _t: _strs(v))
    return converter


_CONVERTER = _converter()
FIELD_NAMES: tuple[str, ...] = tuple(a.name for a in attrs.fields(RunConfig))


def normalize_keys(options: Mapping[str, Any]) -> dict[str, Any]:
    """Accept ``max-turns`` and ``max_turns`` alike; reject unknown keys by name."""
    out = {str(k).replace("-", "_"): v for k, v in options.items()}
    unknown = sorted(set(out) - set(FIELD_NAMES))
    if unknown:
        raise ConfigError(
            f"unknown option(s) {', '.join(unknown)}; known: {', '.join(FIELD_NAMES)}"
        )
    return out


def config_from_options(options: Mapping[str, Any]) -> RunConfig:
    """Build a config from a flat mapping of option names; raises ConfigError with the cause."""
    normalized = normalize_keys(options)
    if normalized.get("server_type") is None and normalized.get("model_url"):
        normalized["server_type"] = "openai"
    try:
        return _CONVERTER.structure(normalized, RunConfig)
    except ConfigError:
        raise
    except cattrs.BaseValidationError as exc:
        causes = "; ".join(_describe_causes(exc))
        raise ConfigError(f"invalid configuration: {causes}") from exc
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid configuration: {exc}") from exc


def _describe_causes(exc: BaseException) -> list[str]:
    if isinstance(exc, cattrs.BaseValidationError):
        out: list[str] = []
        for sub in exc.exceptions:
            note = next(iter(getattr(sub, "__notes__", [])), "")
            out.extend(f"{note}: {d}" if note else d for d in _describe_causes(sub))
        return out
    if isinstance(exc, ConfigError):
        return [str(exc)]
    return [f"{type(exc).__name__}: {exc}"]


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Options from a YAML (``.yaml``/``.yml``), TOML (``.toml``) or JSON file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror or exc}") from exc
    try:
        if file.suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif file.suffix == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError, json.JSONDecodeError) as exc:
        kind = file.suffix[1:].upper() if file.suffix in (".toml", ".json") else "YAML"
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        reason = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise ConfigError(f"config file {file} is not valid {kind}{where}: {reason}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {file} must hold a mapping of options")
    return normalize_keys(data)


def config_to_json(config: RunConfig) -> JSONObject:
    """The config as the JSON ``run.json`` stores."""
    data: JSONObject = _CONVERTER.unstructure(config)
    data["toolsets"] = list(config.toolsets)
    data["disabled_toolsets"] = list(config.disabled_toolsets)
    data["sandbox_url"] = list(config.sandbox_url)
    data["sandbox_image_alias"] = list(config.sandbox_image_alias)
    return data


def differing_keys(recorded: Mapping[str, Any], resolved: RunConfig) -> list[str]:
    """Keys whose resolved value differs from the recorded one (runtime keys excepted)."""
    current = config_to_json(resolved)
    keys = set(current) | set(recorded)
    return sorted(k for k in keys if k not in RUNTIME_KEYS and recorded.get(k) != current.get(k))


def resolve_for_resume(recorded: Mapping[str, Any], explicit: Mapping[str, Any]) -> RunConfig:
    """The recorded config with the explicitly given options on top.

    Raises :class:`ResumeMismatch` naming every key whose given value differs from the record.
    """
    try:
        merged = config_from_options({**normalize_keys(recorded), **normalize_keys(explicit)})
    except ConfigError as exc:
        raise ConfigError(f"run.json holds a config this version cannot use: {exc}") from exc
    diffs = differing_keys(recorded, merged)
    if diffs:
        current = config_to_json(merged)
        details = "; ".join(
            f"{k}: recorded {recorded.get(k)!r}, given {current.get(k)!r}" for k in diffs
        )
        raise ResumeMismatch(
            diffs,
            f"--resume refuses a different config ({details}). Resume with the same options, "
            "or start a new run with another --output.",
        )
    return merged
