"""The ``modal`` backend: one Modal Sandbox per host, one workspace directory per slot.

Only the SDK's async API (``.aio``) is used, so nothing blocks the event loop. Creation is
rate limited and the number of sandboxes still starting is capped (see
:mod:`~hermes_sandbox.backends.modal_config`); every sandbox carries tags naming its pool so a
later run can find and terminate what a killed run left behind. Commands run under the shared
container exec wrapper (GNU ``timeout``, exit 124, nothing outlives the command).

The SDK is reached through :class:`~hermes_sandbox.backends.modal_sdk.ModalSDK`, which imports
``modal`` only when a backend first needs it; tests pass a fake with the same signatures.
"""

from __future__ import annotations

import contextlib
import math
import posixpath
import time
from collections.abc import Mapping
from typing import Any

import anyio
from hermes_protocols import ExecResult, SandboxError, SandboxTimeout, Slot, WorkspaceEscape

from hermes_sandbox._output import CappedOutput
from hermes_sandbox.backends._container_exec import (
    TIMEOUT_EXIT,
    exec_argv,
    reset_script,
    resolve_in_workspace,
)
from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.modal_config import MODAL_MAX_LIFETIME_S, CreationLimiter, ModalConfig
from hermes_sandbox.backends.modal_sdk import AUTH_HELP, ModalAuthError, ModalSDK, map_fs_error

__all__ = [
    "HOST_TAG",
    "MODAL_MAX_LIFETIME_S",
    "POOL_TAG",
    "CreationLimiter",
    "ModalAuthError",
    "ModalBackend",
    "ModalConfig",
    "ModalHost",
    "ModalSDK",
    "ModalSlot",
]

POOL_TAG = "hermes-pool"
HOST_TAG = "hermes-host"
_EXEC_GRACE_S = 30.0


class ModalSlot:
    """One workspace directory inside a Modal sandbox."""

    def __init__(self, host: ModalHost, index: int) -> None:
        self._host = host
        self._index = index
        self._workspace = posixpath.join(host.workspace_root, f"slot-{index}")

    @property
    def slot_id(self) -> str:
        return f"{self._host.host_id}/{self._index}"

    @property
    def workspace(self) -> str:
        return self._workspace

    def resolve(self, path: str, *, allow_root: bool = False) -> str:
        """``path`` inside the workspace, lexically; ``..`` or outside absolute paths fail."""
        return resolve_in_workspace(self._workspace, path, allow_root=allow_root)

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        workdir = self.resolve(cwd, allow_root=True) if cwd is not None else self._workspace
        argv = exec_argv(self.slot_id, command, timeout)
        return await self._host.run(argv, timeout=timeout, workdir=workdir, env=env, stdin=stdin)

    async def _resolve_file(self, path: str) -> str:
        """``path`` with symlinks resolved inside the sandbox; escapes raise WorkspaceEscape."""
        full = self.resolve(path)
        found = await self._host.run(
            ("readlink", "-m", "--", full), timeout=30.0, workdir=self._host.workspace_root
        )
        real = found.stdout.rstrip("\n")
        if not found.ok or not real.startswith(self._workspace + "/"):
            raise WorkspaceEscape(f"{path!r} resolves outside the slot workspace")
        return real

    async def read_file(self, path: str) -> bytes:
        full = await self._resolve_file(path)
        try:
            data: bytes = await self._host.sandbox.filesystem.read_bytes.aio(full)
        except Exception as exc:
            raise map_fs_error(self._host.errors, exc, path) from exc
        return data

    async def write_file(self, path: str, data: bytes) -> None:
        full = await self._resolve_file(path)
        try:
            fs = self._host.sandbox.filesystem
            await fs.make_directory.aio(posixpath.dirname(full), create_parents=True)
            await fs.write_bytes.aio(data, full)
        except Exception as exc:
            raise map_fs_error(self._host.errors, exc, path) from exc

    async def upload(self, local_path: str, remote_path: str) -> None:
        full = await self._resolve_file(remote_path)
        try:
            fs = self._host.sandbox.filesystem
            await fs.make_directory.aio(posixpath.dirname(full), create_parents=True)
            await fs.copy_from_local.aio(local_path, full)
        except Exception as exc:
            raise map_fs_error(self._host.errors, exc, remote_path) from exc

    async def download(self, remote_path: str, local_path: str) -> None:
        full = await self._resolve_file(remote_path)
        try:
            await self._host.sandbox.filesystem.copy_to_local.aio(full, local_path)
        except Exception as exc:
            raise map_fs_error(self._host.errors, exc, remote_path) from exc


class ModalHost:
    """A running Modal sandbox with ``slots`` workspaces under ``config.workspace_root``."""

    def __init__(self, spec: HostSpec, sandbox: Any, config: ModalConfig, errors: Any) -> None:
        self._spec = spec
        self.errors = errors
        self.sandbox = sandbox
        self.config = config
        self.workspace_root = config.workspace_root.format(host_id=spec.host_id)
        self._slots = [ModalSlot(self, i) for i in range(spec.slots)]
        self._closed = False

    @property
    def host_id(self) -> str:
        return self._spec.host_id

    def slot(self, index: int) -> Slot:
        return self._slots[index]

    async def run(
        self,
        argv: tuple[str, ...],
        *,
        timeout: float,
        workdir: str,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run ``argv`` in the sandbox, capped output; a dead sandbox raises SandboxError."""
        started = time.monotonic()
        out = CappedOutput(self.config.max_output_bytes)
        err = CappedOutput(self.config.max_output_bytes)
        try:
            with anyio.fail_after(timeout + _EXEC_GRACE_S):
                proc = await self.sandbox.exec.aio(
                    *argv,
                    timeout=math.ceil(timeout + _EXEC_GRACE_S / 2),
                    workdir=workdir,
                    env=dict(env) if env else None,
                    text=False,
                )
                if stdin:
                    proc.stdin.write(stdin)
                proc.stdin.write_eof()
                await proc.stdin.drain.aio()
                async with anyio.create_task_group() as tg:

                    async def drain(stream: Any, sink: CappedOutput) -> None:
                        async for chunk in stream:  # streamed: never more than the cap held
                            sink.feed(chunk)

                    tg.start_soon(drain, proc.stdout, out)
                    tg.start_soon(drain, proc.stderr, err)
                code: int = await proc.wait.aio()
        except TimeoutError as exc:
            raise SandboxTimeout(
                f"Modal sandbox {self.host_id} did not answer within {timeout + _EXEC_GRACE_S}s"
            ) from exc
        except Exception as exc:
            raise SandboxError(f"exec in Modal sandbox {self.host_id} failed: {exc}") from exc
        duration = time.monotonic() - started
        if code < 0:  # killed by signal N: report 128 + N, as a shell does
            code = 128 - code
        timed_out = code == TIMEOUT_EXIT
        return ExecResult(
            exit_code=code,
            stdout=out.render(),
            stderr=err.render(),
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
            duration_s=duration,
        )

    async def prepare(self) -> None:
        """Create every slot workspace."""
        dirs = tuple(s.workspace for s in self._slots)
        result = await self.run(("mkdir", "-p", *dirs), timeout=60.0, workdir="/")
        if not result.ok:
            raise SandboxError(f"could not create workspaces in {self.host_id}: {result.stderr}")

    async def reset_slot(self, index: int) -> None:
        slot = self._slots[index]
        result = await self.run(
            ("bash", "-c", reset_script(slot.workspace, slot.slot_id)), timeout=60.0, workdir="/"
        )
        if not result.ok:
            raise SandboxError(f"could not reset {slot.slot_id}: {result.stderr}")

    async def healthy(self) -> bool:
        if self._closed:
            return False
        try:
            with anyio.fail_after(30):
                return await self.sandbox.poll.aio() is None
        except Exception:
            return False

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Already gone is fine: terminate is best effort and idempotent.
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(60),
            contextlib.suppress(Exception),
        ):
            await self.sandbox.terminate.aio()


class ModalBackend:
    """Starts Modal sandboxes as hosts; sweeps sandboxes tagged with a pool name."""

    def __init__(self, config: ModalConfig | None = None, *, sdk: ModalSDK | None = None) -> None:
        self.config = config or ModalConfig()
        self._sdk = sdk
        self._app: Any = None
        self._app_lock = anyio.Lock()
        self._limiter = CreationLimiter(self.config.creations_per_second, self.config.max_starting)

    @property
    def name(self) -> str:
        return "modal"

    def _get_sdk(self) -> ModalSDK:
        if self._sdk is None:
            self._sdk = ModalSDK.real()
        return self._sdk

    async def _lookup_app(self) -> Any:
        sdk = self._get_sdk()
        if not sdk.has_credentials():
            raise ModalAuthError(AUTH_HELP)
        async with self._app_lock:
            if self._app is None:
                try:
                    self._app = await sdk.App.lookup.aio(
                        self.config.app_name,
                        create_if_missing=True,
                        environment_name=self.config.environment_name,
                    )
                except sdk.exceptions.AuthError as exc:
                    raise ModalAuthError(f"{AUTH_HELP} ({exc})") from exc
            return self._app

    def _image(self, sdk: ModalSDK) -> Any:
        if self.config.dockerfile is not None:
            return sdk.Image.from_dockerfile(self.config.dockerfile)
        return sdk.Image.from_registry(self.config.image)

    async def start_host(self, spec: HostSpec) -> Host:
        app = await self._lookup_app()
        sdk = self._get_sdk()
        cfg = self.config
        async with self._limiter.starting:
            await self._limiter.wait_turn()
            sandbox: Any = None
            try:
                sandbox = await sdk.Sandbox.create.aio(
                    app=app,
                    image=self._image(sdk),
                    cpu=cfg.cpu,
                    memory=cfg.memory_mb,
                    gpu=cfg.gpu,
                    timeout=cfg.lifetime_s(),
                    idle_timeout=math.ceil(cfg.idle_timeout_s) if cfg.idle_timeout_s else None,
                    secrets=[sdk.Secret.from_name(n) for n in cfg.secrets],
                    env=dict(cfg.env) or None,
                    block_network=cfg.block_network,
                    tags={POOL_TAG: spec.pool_name, HOST_TAG: spec.host_id},
                )
                host = ModalHost(spec, sandbox, cfg, sdk.exceptions)
                await host.prepare()
            except BaseException as exc:
                if sandbox is not None:
                    await ModalHost(spec, sandbox, cfg, sdk.exceptions).close()
                if isinstance(exc, sdk.exceptions.AuthError):
                    raise ModalAuthError(f"{AUTH_HELP} ({exc})") from exc
                if isinstance(exc, Exception) and not isinstance(exc, SandboxError):
                    raise SandboxError(f"could not create Modal sandbox: {exc}") from exc
                raise
        return host

    async def sweep_orphans(self, pool_name: str) -> int:
        app = await self._lookup_app()
        sdk = self._get_sdk()
        found = [
            sb async for sb in sdk.Sandbox.list.aio(app_id=app.app_id, tags={POOL_TAG: pool_name})
        ]
        for sb in found:
            shielded = anyio.CancelScope(shield=True)
            with shielded, anyio.move_on_after(60), contextlib.suppress(Exception):
                await sb.terminate.aio()  # failures: gone meanwhile
        return len(found)
