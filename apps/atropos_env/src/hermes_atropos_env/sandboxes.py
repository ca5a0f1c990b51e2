"""``--env.tool_pool_mode`` and the pool fields -> a hermes-sandbox backend, pool and toolsets."""

from __future__ import annotations

from hermes_protocols import ConfigError, Toolset
from hermes_sandbox import BwrapBackend, BwrapConfig, HostBackend, LocalBackend, PoolConfig
from hermes_sandbox.tools import NamedToolset, TerminalTool, file_toolset

from hermes_atropos_env.config import HermesAtroposEnvConfig

#: seconds added to terminal_timeout for the loop's per-tool-call budget
TOOL_TIMEOUT_MARGIN_S = 15.0


def build_backend(env: HermesAtroposEnvConfig) -> HostBackend:
    """The sandbox backend named by ``tool_pool_mode``."""
    mode = env.tool_pool_mode
    if mode == "bwrap":
        return BwrapBackend(BwrapConfig())
    if mode == "local":
        return LocalBackend()
    if mode == "modal":
        from hermes_sandbox.backends.modal import ModalBackend, ModalConfig

        return ModalBackend(
            ModalConfig(
                image=env.modal_image,
                cpu=env.modal_cpu,
                memory_mb=env.modal_memory,
                gpu=env.modal_gpu,
                secrets=tuple(env.modal_secrets or ()),
                idle_timeout_s=float(env.terminal_lifetime),
            )
        )
    raise ConfigError(
        f"--env.tool_pool_mode {mode} is not wired in this build of atropos_env yet; "
        "use bwrap, local or modal"
    )


def pool_config(env: HermesAtroposEnvConfig) -> PoolConfig:
    """Pool sizing: Modal uses the modal_* fields, other backends the *_containers fields."""
    if env.tool_pool_mode == "modal":
        slots, low, high = (
            env.modal_slots_per_sandbox,
            env.modal_min_sandboxes,
            env.modal_max_sandboxes,
        )
    else:
        slots, low, high = env.slots_per_container, 0, env.max_containers
        if env.tool_pool_mode in ("docker", "nomad", "remote"):
            low = env.min_containers
    return PoolConfig(
        name=f"atropos-{env.environment}".replace("_", "-"),
        slots_per_host=slots,
        min_hosts=low,
        max_hosts=high,
        idle_timeout=float(env.terminal_lifetime),
        acquire_timeout=max(120.0, float(env.terminal_timeout)),
    )


def build_toolsets(env: HermesAtroposEnvConfig) -> list[Toolset]:
    """hermes-agent's ``terminal`` (with ``terminal_timeout`` as its default) and ``file``."""
    terminal = NamedToolset(
        "terminal",
        (TerminalTool(default_timeout=env.terminal_timeout, max_timeout=env.terminal_lifetime),),
    )
    return [terminal, file_toolset()]
