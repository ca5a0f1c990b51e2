"""``--sandbox`` and its options -> a hermes-sandbox backend, pool config and toolsets."""

from __future__ import annotations

from hermes_protocols import ConfigError, Toolset
from hermes_sandbox import BwrapBackend, BwrapConfig, HostBackend, LocalBackend, PoolConfig
from hermes_sandbox.tools import NamedToolset, TerminalTool, file_toolset

from hermes_batch_runner.config import RunConfig
from hermes_batch_runner.credentials import Credentials

#: seconds a terminal command may ask for at most, above --command-timeout's default
MAX_COMMAND_TIMEOUT_S = 600


def build_backend(config: RunConfig, credentials: Credentials) -> HostBackend:
    """The backend named by ``--sandbox``; unavailable ones fail with what to do instead."""
    name = config.sandbox
    if name == "bwrap":
        return BwrapBackend(BwrapConfig(allow_network=config.sandbox_allow_network))
    if name == "local":
        return LocalBackend()
    if name == "modal":
        from hermes_sandbox.backends.modal import ModalBackend, ModalConfig

        return ModalBackend(
            ModalConfig(
                image=config.sandbox_image or "python:3.12-slim",
                rollout_timeout_s=config.rollout_timeout,
                block_network=not config.sandbox_allow_network,
            )
        )
    if name == "remote":
        from hermes_sandbox.backends.remote import RemoteBackend, RemoteConfig

        if not credentials.sandbox_token:
            raise ConfigError(
                "--sandbox remote needs the servers' token: --sandbox-token or "
                "$HERMES_SANDBOX_TOKEN"
            )
        remote = RemoteConfig(
            urls=config.sandbox_url,  # type: ignore[arg-type]  # attrs converter=tuple
            token=credentials.sandbox_token,
        )
        return RemoteBackend(remote)
    if name == "docker":
        from hermes_sandbox.backends.docker import DockerBackend, DockerConfig

        return DockerBackend(
            DockerConfig(
                image=config.sandbox_image or "python:3.12-slim",
                allow_network=config.sandbox_allow_network,
            )
        )
    from hermes_sandbox.backends.nomad import NomadBackend, NomadConfig

    if not config.sandbox_image:
        raise ConfigError(
            "--sandbox nomad needs --sandbox-image (an image with hermes-sandbox and bubblewrap)"
        )
    assert config.nomad_address is not None  # RunConfig checks it
    return NomadBackend(
        NomadConfig(
            address=config.nomad_address,
            token=credentials.nomad_token,
            image=config.sandbox_image,
            allow_network=config.sandbox_allow_network,
        )
    )


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
    default = int(config.command_timeout)
    terminal = NamedToolset(
        "terminal",
        (TerminalTool(default_timeout=default, max_timeout=max(default, MAX_COMMAND_TIMEOUT_S)),),
    )
    return [terminal, file_toolset()]
