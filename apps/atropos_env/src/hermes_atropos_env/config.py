"""Configuration of the adapter: the ``--env.*`` and ``--openai.*`` namespaces.

``HermesAtroposEnvConfig`` extends atroposlib's ``BaseEnvConfig`` with the field names and
meanings of hermes-agent's ``HermesAgentEnvConfig`` (toolsets, agent loop, terminal backend,
dataset, parser, ``extra_body``) plus the sandbox-pool fields and ``max_tokens_per_turn``.
``InferenceConfig`` is the ``--openai.*`` namespace with the phase-selecting ``server_type``.
"""

from __future__ import annotations

from typing import Any, Literal

from hermes_rollouts import ServerType
from hermes_rollouts import option_defaults as defaults
from pydantic import BaseModel, Field, model_validator

from hermes_atropos_env.atroposlib_import import APIServerConfig, BaseEnvConfig

ToolPoolMode = Literal["local", "bwrap", "docker", "modal", "nomad", "remote", "ray"]
OverlongPolicy = Literal["drop", "truncate"]

TOKEN_SERVER_TYPES: frozenset[str] = frozenset({"embedded", "sglang", "vllm", "llama_cpp"})


class HermesAtroposEnvConfig(BaseEnvConfig):  # type: ignore[misc]
    """``--env.*``: atroposlib's env config plus hermes-agent's agent-env fields."""

    environment: str = Field(
        default=defaults.ENVIRONMENT.value,
        description="The environment: a shipped or installed name (atropos_env --list-envs), "
        "package.module:NAME or path/to/file.py:NAME.",
    )
    environment_options: dict[str, Any] | None = Field(
        default=None,
        description='The environment\'s options, e.g. {"families": ["write_word"]} for '
        "endless_terminals (over those derived from --env.dataset_name).",
    )
    # toolsets (hermes-agent semantics: enabled_toolsets XOR distribution, disabled filters)
    enabled_toolsets: list[str] | None = Field(
        default=None, description="Explicit toolsets to enable; None = the environment's own."
    )
    disabled_toolsets: list[str] | None = Field(
        default=None, description="Toolsets removed from enabled_toolsets or the distribution."
    )
    distribution: str | None = Field(
        default=None, description="Named toolset distribution, sampled once per group."
    )
    # agent loop
    max_agent_turns: int = Field(
        default=defaults.MAX_TURNS.value, description=defaults.MAX_TURNS.help
    )
    system_prompt: str | None = Field(
        default=None, description="System prompt replacing the environment's own."
    )
    prefill_messages: str | None = Field(
        default=None,
        description="JSON file of chat messages put before each task (few-shot steering); "
        "'none' = off. Default with the embedded model: a terminal demonstration.",
    )
    agent_temperature: float = Field(
        default=defaults.TEMPERATURE.value, description=defaults.TEMPERATURE.help
    )
    max_tokens_per_turn: int = Field(
        default=defaults.MAX_TOKENS.value,
        description=f"{defaults.MAX_TOKENS.help}; max_token_length is the whole sequence.",
    )
    max_token_length: int = Field(
        default=defaults.CONTEXT_TOKENS.value, description=defaults.CONTEXT_TOKENS.help
    )
    # terminal / sandbox pool
    terminal_backend: ToolPoolMode | None = Field(
        default=None, description="Alias of tool_pool_mode (hermes-agent's name)."
    )
    tool_pool_mode: ToolPoolMode = Field(
        default=defaults.SANDBOX.value, description=defaults.SANDBOX.help
    )
    terminal_timeout: float = Field(
        default=defaults.COMMAND_TIMEOUT.value, description=defaults.COMMAND_TIMEOUT.help
    )
    terminal_lifetime: int = Field(
        default=3600, description="Sandbox idle lifetime (seconds); longer than a rollout."
    )
    modal_image: str | None = Field(default=None, description="Modal image (registry tag).")
    modal_slots_per_sandbox: int = Field(default=10, description="Slots per Modal sandbox.")
    modal_min_sandboxes: int = Field(default=1, description="Modal sandboxes kept warm.")
    modal_max_sandboxes: int = Field(default=8, description="Modal sandboxes at most.")
    modal_cpu: float = Field(default=1.0, description="CPUs per Modal sandbox.")
    modal_memory: int = Field(default=2048, description="Memory (MiB) per Modal sandbox.")
    modal_gpu: str | None = Field(default=None, description="GPU type of Modal sandboxes.")
    modal_secrets: list[str] | None = Field(default=None, description="Modal secret names.")
    sandbox_image: str | None = Field(
        default=None,
        description="docker/nomad host image (docker: python:3.12-slim if unset; nomad: "
        "required, an image with hermes-sandbox and bubblewrap).",
    )
    sandbox_image_aliases: dict[str, str] | None = Field(
        default=None,
        description="docker: image name -> local image, for tasks' own images and the FROM "
        "lines of their Dockerfiles on a host that cannot pull them.",
    )
    nomad_address: str | None = Field(default=None, description="Nomad HTTP API address.")
    ray_address: str | None = Field(default=None, description="ray: the Ray cluster (host:port).")
    ray_python: str | None = Field(
        default=None, description="ray: the nodes' Python with hermes-sandbox installed."
    )
    nomad_job_id: str | None = Field(
        default=None, description="Nomad job id of the pool (default hermes-sandbox-atropos-ENV)."
    )
    remote_urls: list[str] | None = Field(
        default=None,
        description="remote: sandbox server URLs (token from $HERMES_SANDBOX_TOKEN).",
    )
    slots_per_container: int = Field(
        default=defaults.SANDBOX_SLOTS.value,
        description=f"{defaults.SANDBOX_SLOTS.help}: bwrap/local/docker/nomad/remote.",
    )
    min_containers: int = Field(default=1, description="docker/nomad/remote hosts kept running.")
    max_containers: int = Field(default=4, description="Hosts at most.")
    # dataset
    dataset_name: str | None = Field(default=None, description="Dataset name or local path.")
    dataset_split: str = Field(default="train", description="Dataset split.")
    prompt_field: str = Field(default="prompt", description="Dataset field with the prompt.")
    max_items: int | None = Field(default=None, description="Stop after this many items.")
    eval_split: str = Field(default="eval", description="Split used by `evaluate`.")
    # parsing / provider
    tool_call_parser: str = Field(default=defaults.PARSER.value, description=defaults.PARSER.help)
    extra_body: dict[str, Any] | None = Field(
        default=None, description="Passed untouched to OpenAI-compatible chat requests."
    )
    # group building
    overlong_policy: OverlongPolicy = Field(
        default="drop",
        description="Sequences >= max_token_length: drop them or truncate (mask adjusted).",
    )
    drain_timeout: float = Field(
        default=120.0,
        description="Seconds in-flight groups may take to finish after a first SIGINT/SIGTERM "
        "before they are cancelled (a second signal cancels them at once).",
    )
    seed: int = Field(default=defaults.SEED.value, description=defaults.SEED.help)
    # training loop
    lora_adapter: str | None = Field(
        default=None,
        description="Embedded model: a GGUF LoRA adapter file, (re)loaded before each group "
        "whenever it changes (apps/trainer --atropos-url rewrites it after every update).",
    )

    @model_validator(mode="after")
    def _apply_alias(self) -> HermesAtroposEnvConfig:
        if self.terminal_backend is not None:
            self.tool_pool_mode = self.terminal_backend
        return self


class InferenceConfig(BaseModel):
    """``--openai.*``: where generations come from. No ``base_url`` = the embedded model."""

    server_type: ServerType = Field(default="embedded", description="Inference phase/engine.")
    base_url: str = Field(default="", description="Server URL; empty = embedded model.")
    api_key: str = Field(default="", description="API key for the server.")
    model_name: str = Field(default="default", description="Model name sent to the server.")
    tokenizer_name: str = Field(
        default="", description="HF tokenizer (local dir or hub name); empty = from the model."
    )
    model_path: str = Field(default="", description="Embedded: GGUF path; empty = SmolLM2.")
    timeout: float = Field(
        default=600.0, description="Per-request timeout (seconds), queueing included."
    )
    num_max_requests_at_once: int = Field(default=8, description="Concurrent requests.")
    end_token_ids: list[int] | None = Field(
        default=None,
        description="Ids ending a turn (token servers); empty = from the server / tokenizer.",
    )
    server_logprob_mode: Literal["sampled", "raw"] | None = Field(
        default=None,
        description="Logprobs a vLLM/SGLang server returns; empty = vLLM raw, SGLang sampled.",
    )
    parse_content_tool_calls: bool = Field(
        default=False,
        description="Phase 1: parse tool calls in content with the env's parser (server "
        "ignores tools).",
    )

    @property
    def token_mode(self) -> bool:
        """True in phase 2 (exact tokens): every server type except ``openai``."""
        return self.server_type in TOKEN_SERVER_TYPES


def atropos_server_configs(inference: InferenceConfig) -> list[APIServerConfig]:
    """The server list handed to ``BaseEnv``: always a list (trap: a bare ``APIServerConfig``
    makes atroposlib's ServerManager target localhost:9004-9007 instead).

    The adapter does its own inference; atroposlib only uses this for bookkeeping, so the
    entry is an ``openai``-typed config with health checks off.
    """
    return [
        APIServerConfig(
            server_type="openai",
            base_url=inference.base_url or "http://127.0.0.1:1/v1",
            api_key=inference.api_key or "unused",
            model_name=inference.model_name,
            timeout=int(inference.timeout),
            num_max_requests_at_once=inference.num_max_requests_at_once,
            health_check=False,
        )
    ]
