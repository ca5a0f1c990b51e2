"""Backend kind + options -> a :class:`HostBackend`; toolsets with a default command timeout.

Apps map their own configuration onto a :class:`SandboxSpec` and call :func:`build_backend`;
the optional backends (docker, modal, nomad, remote, ray) are imported only when chosen. A missing
setting raises :class:`~hermes_protocols.ConfigError` naming what to set, in the app's own
option names when it passes ``option_names`` (e.g. ``{"token": "--sandbox-token"}``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any, Literal, TypeAlias, get_args

import attrs
from hermes_protocols import ConfigError

from hermes_sandbox.backends.base import HostBackend
from hermes_sandbox.backends.bwrap import BwrapBackend, BwrapConfig
from hermes_sandbox.backends.docker_images import alias_pairs
from hermes_sandbox.backends.local import LocalBackend
from hermes_sandbox.tools import NamedToolset, TerminalTool, file_toolset

BackendKind: TypeAlias = Literal["bwrap", "local", "docker", "modal", "nomad", "remote", "ray"]
BACKEND_KINDS: tuple[str, ...] = get_args(BackendKind)
#: image of docker and modal hosts when the spec names none
DEFAULT_IMAGE = "python:3.12-slim"
DEFAULT_NOMAD_JOB_PREFIX = "hermes-sandbox-"

_MODULES = {
    "docker": "hermes_sandbox.backends.docker",
    "modal": "hermes_sandbox.backends.modal",
    "nomad": "hermes_sandbox.backends.nomad",
    "remote": "hermes_sandbox.backends.remote",
    "ray": "hermes_sandbox.backends.ray",
}


def _kind(_inst: object, _attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in BACKEND_KINDS:
        raise ConfigError(
            f"unknown sandbox backend {value!r}; choose one of {', '.join(BACKEND_KINDS)}"
        )


def _strs(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _optional_positive(_inst: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not value > 0:
        raise ConfigError(f"SandboxSpec.{attribute.name} must be positive, got {value}")


@attrs.frozen(slots=True, kw_only=True)
class SandboxSpec:
    """Which backend to start and the settings it needs (unused fields are ignored).

    ``image``: docker/modal image (default :data:`DEFAULT_IMAGE`); required by nomad (an image
    holding ``hermes-sandbox`` and bubblewrap). ``image_aliases``: docker image name -> local
    image, for this image, items' own images and built Dockerfiles' ``FROM`` on a Docker host
    that cannot pull them. ``urls``/``token``: the remote sandbox servers
    and their bearer token. ``nomad_*``: the Nomad HTTP API, its ACL token and the job-id
    prefix (job id = prefix + pool name). ``cpu``, ``memory_mb``, ``gpu``, ``secrets``,
    ``idle_timeout_s``, ``rollout_timeout_s``: Modal sandbox settings (``None`` = Modal
    backend defaults). ``ray_address``: the Ray cluster of the ray backend, whose hosts
    reserve ``cpu`` CPUs (default 1) and ``memory_mb`` each, their actors running on
    ``ray_python`` (the nodes' Python with hermes-sandbox; see ``RayConfig.python``).
    Tokens are credentials: they never appear in ``repr``.
    """

    kind: BackendKind = attrs.field(default="bwrap", validator=_kind)
    image: str | None = None
    image_aliases: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=alias_pairs)
    allow_network: bool = False
    urls: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    token: str | None = attrs.field(default=None, repr=False)
    nomad_address: str | None = None
    nomad_token: str | None = attrs.field(default=None, repr=False)
    nomad_job_prefix: str = DEFAULT_NOMAD_JOB_PREFIX
    cpu: float | None = attrs.field(default=None, validator=_optional_positive)
    memory_mb: int | None = attrs.field(default=None, validator=_optional_positive)
    gpu: str | None = None
    secrets: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    idle_timeout_s: float | None = attrs.field(default=None, validator=_optional_positive)
    rollout_timeout_s: float | None = attrs.field(default=None, validator=_optional_positive)
    ray_address: str | None = None
    ray_python: str | None = None


def _option(name: str, option_names: Mapping[str, str] | None) -> str:
    return (option_names or {}).get(name, f"SandboxSpec.{name}")


def _load(kind: str) -> ModuleType:
    try:
        return importlib.import_module(_MODULES[kind])
    except ImportError as exc:
        raise ConfigError(
            f"the {kind} sandbox backend cannot be loaded ({exc}); install its dependencies "
            f"(e.g. `pip install 'hermes-sandbox[{kind}]'`) or choose bwrap or local"
        ) from exc


def _modal(spec: SandboxSpec) -> HostBackend:
    modal = _load("modal")
    settings: dict[str, Any] = {
        "image": spec.image or DEFAULT_IMAGE,
        "gpu": spec.gpu,
        "secrets": spec.secrets,
        "idle_timeout_s": spec.idle_timeout_s,
        "block_network": not spec.allow_network,
    }
    optional = {
        "cpu": spec.cpu,
        "memory_mb": spec.memory_mb,
        "rollout_timeout_s": spec.rollout_timeout_s,
    }
    settings.update({k: v for k, v in optional.items() if v is not None})
    backend: HostBackend = modal.ModalBackend(modal.ModalConfig(**settings))
    return backend


def _remote(spec: SandboxSpec, option_names: Mapping[str, str] | None) -> HostBackend:
    if not spec.urls:
        raise ConfigError(
            f"the remote sandbox backend needs {_option('urls', option_names)}: "
            "one or more sandbox server URLs"
        )
    if not spec.token:
        raise ConfigError(
            f"the remote sandbox backend needs the servers' bearer token: "
            f"{_option('token', option_names)}"
        )
    remote = _load("remote")
    backend: HostBackend = remote.RemoteBackend(
        remote.RemoteConfig(urls=spec.urls, token=spec.token)
    )
    return backend


def _nomad(spec: SandboxSpec, option_names: Mapping[str, str] | None) -> HostBackend:
    if not spec.nomad_address:
        raise ConfigError(
            f"the nomad sandbox backend needs {_option('nomad_address', option_names)}: "
            "the Nomad HTTP API URL (e.g. http://127.0.0.1:4646)"
        )
    if not spec.image:
        raise ConfigError(
            f"the nomad sandbox backend needs {_option('image', option_names)}: "
            "an image with hermes-sandbox and bubblewrap"
        )
    nomad = _load("nomad")
    backend: HostBackend = nomad.NomadBackend(
        nomad.NomadConfig(
            address=spec.nomad_address,
            token=spec.nomad_token,
            image=spec.image,
            allow_network=spec.allow_network,
            job_prefix=spec.nomad_job_prefix,
        )
    )
    return backend


def _ray(spec: SandboxSpec, option_names: Mapping[str, str] | None) -> HostBackend:
    if not spec.ray_address:
        raise ConfigError(
            f"the ray sandbox backend needs {_option('ray_address', option_names)}: "
            "the Ray cluster's address (host:port of its head, or auto)"
        )
    ray = _load("ray")
    backend: HostBackend = ray.RayBackend(
        ray.RayConfig(
            address=spec.ray_address,
            cpus=spec.cpu or 1.0,
            memory_mb=spec.memory_mb,
            python=spec.ray_python,
            bwrap=BwrapConfig(allow_network=spec.allow_network),
        )
    )
    return backend


def build_backend(
    spec: SandboxSpec, *, option_names: Mapping[str, str] | None = None
) -> HostBackend:
    """The backend ``spec.kind`` names, configured from ``spec`` (not started yet).

    ``option_names`` maps :class:`SandboxSpec` field names to the caller's option names for
    error messages. Raises :class:`ConfigError` when a needed setting is missing or an optional
    backend cannot be imported.
    """
    if spec.kind == "bwrap":
        return BwrapBackend(BwrapConfig(allow_network=spec.allow_network))
    if spec.kind == "local":
        return LocalBackend()
    if spec.kind == "docker":
        docker = _load("docker")
        backend: HostBackend = docker.DockerBackend(
            docker.DockerConfig(
                image=spec.image or DEFAULT_IMAGE,
                allow_network=spec.allow_network,
                image_aliases=spec.image_aliases,
                alias_option=_option("image_aliases", option_names),
            )
        )
        return backend
    if spec.kind == "modal":
        return _modal(spec)
    if spec.kind == "remote":
        return _remote(spec, option_names)
    if spec.kind == "ray":
        return _ray(spec, option_names)
    return _nomad(spec, option_names)


def build_toolsets(default_timeout: float, max_timeout: float) -> list[NamedToolset]:
    """hermes-agent's ``terminal`` (``default_timeout`` seconds per command unless the call asks
    for more, up to ``max(default_timeout, max_timeout)``) and ``file`` toolsets."""
    if not default_timeout > 0:
        raise ConfigError(f"the default command timeout must be positive, got {default_timeout}")
    default = max(1, int(default_timeout))
    terminal = TerminalTool(default_timeout=default, max_timeout=max(default, int(max_timeout)))
    return [NamedToolset("terminal", (terminal,)), file_toolset()]
