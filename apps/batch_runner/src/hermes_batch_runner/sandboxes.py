"""``--sandbox`` and its options -> a hermes-sandbox backend, pool config and toolsets."""

from __future__ import annotations

from hermes_protocols import Toolset
from hermes_sandbox import HostBackend, PoolConfig
from hermes_sandbox.factory import SandboxSpec
from hermes_sandbox.factory import build_backend as build_sandbox_backend
from hermes_sandbox.factory import build_toolsets as build_sandbox_toolsets

from hermes_batch_runner.config import RunConfig
from hermes_batch_runner.credentials import SANDBOX_TOKEN_VARIABLE, Credentials

#: seconds a terminal command may ask for at most, above --command-timeout's default
MAX_COMMAND_TIMEOUT_S = 600

#: SandboxSpec fields -> the options that set them, for error messages
OPTION_NAMES = {
    "image": "--sandbox-image",
    "urls": "--sandbox-url",
    "token": f"--sandbox-token or ${SANDBOX_TOKEN_VARIABLE}",
    "nomad_address": "--nomad-address",
}


def sandbox_spec(config: RunConfig, credentials: Credentials) -> SandboxSpec:
    """The ``--sandbox*`` options (and the sandbox credentials) as a hermes-sandbox spec."""
    return SandboxSpec(
        kind=config.sandbox,
        image=config.sandbox_image,
        allow_network=config.sandbox_allow_network,
        urls=config.sandbox_url,
        token=credentials.sandbox_token,
        nomad_address=config.nomad_address,
        nomad_token=credentials.nomad_token,
        rollout_timeout_s=config.rollout_timeout,
    )


def build_backend(config: RunConfig, credentials: Credentials) -> HostBackend:
    """The backend named by ``--sandbox``; unavailable ones fail with what to do instead."""
    return build_sandbox_backend(sandbox_spec(config, credentials), option_names=OPTION_NAMES)


def pool_config(config: RunConfig, run_name: str) -> PoolConfig:
    """One pool per run; its name lets a restarted run sweep the hosts a killed one left."""
    return PoolConfig(
        name=run_name,
        slots_per_host=config.sandbox_slots,
        min_hosts=0,
        max_hosts=config.sandbox_max_hosts,
        acquire_timeout=max(120.0, config.rollout_timeout),
    )


def build_toolsets(config: RunConfig) -> list[Toolset]:
    """hermes-agent's ``terminal`` (``--command-timeout`` as its default) and ``file``."""
    return list(build_sandbox_toolsets(config.command_timeout, MAX_COMMAND_TIMEOUT_S))
