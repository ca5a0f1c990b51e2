"""``--env.tool_pool_mode`` and the pool fields -> a hermes-sandbox backend, pool and toolsets."""

from __future__ import annotations

from hermes_protocols import Toolset
from hermes_sandbox import HostBackend, PoolConfig
from hermes_sandbox.factory import DEFAULT_NOMAD_JOB_PREFIX, SandboxSpec
from hermes_sandbox.factory import build_backend as build_sandbox_backend
from hermes_sandbox.factory import build_toolsets as build_sandbox_toolsets

from hermes_atropos_env.config import HermesAtroposEnvConfig
from hermes_atropos_env.credentials import SANDBOX_TOKEN_VARIABLE, SandboxCredentials

#: seconds added to terminal_timeout for the loop's per-tool-call budget
TOOL_TIMEOUT_MARGIN_S = 15.0

#: SandboxSpec fields -> the options that set them, for error messages
OPTION_NAMES = {
    "image": "--env.sandbox_image",
    "urls": "--env.remote_urls",
    "token": f"${SANDBOX_TOKEN_VARIABLE}",
    "nomad_address": "--env.nomad_address",
}


def sandbox_spec(env: HermesAtroposEnvConfig, credentials: SandboxCredentials) -> SandboxSpec:
    """The pool fields of ``--env.*`` (and the sandbox credentials) as a hermes-sandbox spec."""
    modal = env.tool_pool_mode == "modal"
    return SandboxSpec(
        kind=env.tool_pool_mode,
        image=env.modal_image if modal else env.sandbox_image,
        urls=tuple(env.remote_urls or ()),
        token=credentials.sandbox_token,
        nomad_address=env.nomad_address,
        nomad_token=credentials.nomad_token,
        # --env.nomad_job_id is the whole job id: it becomes the pool name, without prefix
        nomad_job_prefix="" if env.nomad_job_id else DEFAULT_NOMAD_JOB_PREFIX,
        cpu=env.modal_cpu,
        memory_mb=env.modal_memory,
        gpu=env.modal_gpu,
        secrets=tuple(env.modal_secrets or ()),
        idle_timeout_s=float(env.terminal_lifetime),
    )


def build_backend(env: HermesAtroposEnvConfig, credentials: SandboxCredentials) -> HostBackend:
    """The sandbox backend named by ``tool_pool_mode``."""
    return build_sandbox_backend(sandbox_spec(env, credentials), option_names=OPTION_NAMES)


def pool_name(env: HermesAtroposEnvConfig) -> str:
    """``--env.nomad_job_id`` on nomad, else ``atropos-<environment>``."""
    if env.tool_pool_mode == "nomad" and env.nomad_job_id:
        return env.nomad_job_id
    return f"atropos-{env.environment}".replace("_", "-")


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
        name=pool_name(env),
        slots_per_host=slots,
        min_hosts=low,
        max_hosts=high,
        idle_timeout=float(env.terminal_lifetime),
        acquire_timeout=max(120.0, float(env.terminal_timeout)),
    )


def build_toolsets(env: HermesAtroposEnvConfig) -> list[Toolset]:
    """hermes-agent's ``terminal`` (with ``terminal_timeout`` as its default) and ``file``."""
    return list(build_sandbox_toolsets(env.terminal_timeout, env.terminal_lifetime))
