"""A local fake of the parts of the ``modal`` SDK the modal backend uses, plus its own checks.

Every fake call binds its arguments against the INSTALLED SDK's real signature first
(``inspect.signature(modal.Sandbox.create)`` ...), so an SDK change that breaks the backend's
calls breaks these tests too. Commands run as local processes; "container" paths are local
paths (tests point ``workspace_root`` at a temporary directory). The conftest loads this file
by path to offer the fake to the conformance suite.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import modal
import modal.exception
import pytest
from anyio.abc import Process
from hermes_sandbox.backends.modal import ModalSDK


def _checked(real: Callable[..., Any], fake: Callable[..., Any], *, method: bool) -> Any:
    """An object whose ``.aio`` binds arguments to ``real``'s signature, then runs ``fake``."""
    signature = inspect.signature(real)

    class _Aio:
        async def aio(self, *args: Any, **kwargs: Any) -> Any:
            bound_args = (None, *args) if method else args
            signature.bind(*bound_args, **kwargs)  # TypeError if the SDK changed
            result = fake(*args, **kwargs)
            if inspect.isawaitable(result):
                return await result
            return result

    return _Aio()


class FakeStdin:
    def __init__(self, process: Process) -> None:
        self._process = process
        self._buffer = bytearray()
        self._eof = False
        inspect.signature(modal.io_streams.StreamWriter.write).bind(None, b"")
        self.drain = _checked(modal.io_streams.StreamWriter.drain, self._drain, method=True)

    def write(self, data: bytes) -> None:
        self._buffer += data

    def write_eof(self) -> None:
        self._eof = True

    async def _drain(self) -> None:
        assert self._process.stdin is not None
        if self._buffer:
            with contextlib.suppress(anyio.BrokenResourceError, BrokenPipeError):
                await self._process.stdin.send(bytes(self._buffer))
            self._buffer.clear()
        if self._eof:
            await self._process.stdin.aclose()


class FakeReader:
    def __init__(self, stream: Any) -> None:
        self._stream = stream
        reader_cls: Any = modal.io_streams.StreamReader
        self.read = _checked(reader_cls.read, self._read, method=True)
        assert hasattr(reader_cls, "__aiter__")  # the real reader streams too

    async def _read(self) -> bytes:
        chunks = [chunk async for chunk in self._stream]
        return b"".join(chunks)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._stream.__aiter__()  # type: ignore[no-any-return]


class FakeProcess:
    def __init__(self, process: Process, timeout: int | None) -> None:
        self._process = process
        self._timeout = timeout
        self.stdin = FakeStdin(process)
        self.stdout = FakeReader(process.stdout)
        self.stderr = FakeReader(process.stderr)
        cp = modal.container_process.ContainerProcess
        self.wait = _checked(cp.wait, self._wait, method=True)

    async def _wait(self) -> int:
        with anyio.move_on_after(self._timeout or 1e9):
            return await self._process.wait()
        os.killpg(self._process.pid, signal.SIGKILL)
        return await self._process.wait()


class FakeFilesystem:
    def __init__(self, sandbox: FakeSandbox) -> None:
        fs = modal.sandbox.sandbox.SandboxFilesystem
        self._sandbox = sandbox
        self.read_bytes = _checked(fs.read_bytes, self._read_bytes, method=True)
        self.write_bytes = _checked(fs.write_bytes, self._write_bytes, method=True)
        self.make_directory = _checked(fs.make_directory, self._mkdir, method=True)
        self.copy_from_local = _checked(fs.copy_from_local, self._from_local, method=True)
        self.copy_to_local = _checked(fs.copy_to_local, self._to_local, method=True)

    @staticmethod
    def _check(path: str, *, want_file: bool) -> Path:
        p = Path(path)
        errors = modal.exception
        if want_file and p.is_dir():
            raise errors.SandboxFilesystemIsADirectoryError(path)
        if want_file and not p.exists():
            raise errors.SandboxFilesystemNotFoundError(path)
        if want_file and not os.access(p, os.R_OK):
            raise errors.SandboxFilesystemPermissionError(path)
        return p

    async def _read_bytes(self, remote_path: str) -> bytes:
        return await anyio.Path(self._check(remote_path, want_file=True)).read_bytes()

    async def _write_bytes(self, data: bytes, remote_path: str) -> None:
        p = anyio.Path(remote_path)
        if await p.is_dir():
            raise modal.exception.SandboxFilesystemIsADirectoryError(remote_path)
        try:
            await p.write_bytes(bytes(data))
        except PermissionError as exc:
            raise modal.exception.SandboxFilesystemPermissionError(remote_path) from exc

    async def _mkdir(self, remote_path: str, *, create_parents: bool = True) -> None:
        await anyio.Path(remote_path).mkdir(parents=create_parents, exist_ok=True)

    async def _from_local(self, local_path: str, remote_path: str) -> None:
        if await anyio.Path(remote_path).is_dir():
            raise modal.exception.SandboxFilesystemIsADirectoryError(remote_path)
        await anyio.to_thread.run_sync(shutil.copyfile, local_path, remote_path)

    async def _to_local(self, remote_path: str, local_path: str) -> None:
        src = self._check(remote_path, want_file=True)
        await anyio.to_thread.run_sync(shutil.copyfile, src, local_path)


class FakeSandbox:
    """One fake sandbox; every exec is a local process group it kills on terminate."""

    def __init__(self, registry: FakeModal, kwargs: dict[str, Any]) -> None:
        self.object_id = f"sb-fake-{next(registry.ids)}"
        self.create_kwargs = kwargs
        self.tags: dict[str, str] = dict(kwargs.get("tags") or {})
        self._registry = registry
        self._processes: list[Process] = []
        self.returncode: int | None = None
        real = modal.Sandbox
        self.exec = _checked(real.exec, self._exec, method=True)
        self.poll = _checked(real.poll, self._poll, method=True)
        self.terminate = _checked(real.terminate, self._terminate, method=True)
        self.filesystem = FakeFilesystem(self)

    async def _exec(
        self,
        *args: str,
        timeout: int | None = None,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        text: bool = True,
        **_: Any,
    ) -> FakeProcess:
        assert not text, "the backend must ask for bytes"
        if self.returncode is not None:
            raise modal.exception.SandboxTerminatedError("sandbox terminated")
        self._registry.execs += 1
        process = await anyio.open_process(
            list(args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            # A sandbox does not inherit this machine's environment: only the image's basics.
            env={"PATH": os.environ["PATH"], "HOME": "/root", "LANG": "C.UTF-8", **(env or {})},
            start_new_session=True,
        )
        self._processes.append(process)
        return FakeProcess(process, timeout)

    def _poll(self) -> int | None:
        return self.returncode

    async def _terminate(self, *, wait: bool = False) -> int | None:
        if self.returncode is None:
            self.returncode = 137
            for process in self._processes:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                with anyio.move_on_after(5):
                    await process.wait()
            self._registry.live.pop(self.object_id, None)
        return self.returncode


class FakeModal:
    """The fake SDK's state: live sandboxes, creation times, options seen."""

    def __init__(self) -> None:
        self.ids = itertools.count()
        self.live: dict[str, FakeSandbox] = {}
        self.created: list[FakeSandbox] = []
        self.create_times: list[float] = []
        self.execs = 0
        self.auth_error = False
        self.fail_create: Exception | None = None

    def sdk(self, *, has_credentials: bool = True) -> ModalSDK:
        registry = self

        async def lookup(name: str, **_: Any) -> Any:
            if registry.auth_error:
                raise modal.exception.AuthError("Token missing")
            return type("FakeApp", (), {"app_id": f"ap-{name}"})()

        async def create(*args: str, **kwargs: Any) -> FakeSandbox:
            registry.create_times.append(anyio.current_time())
            if registry.fail_create is not None:
                raise registry.fail_create
            sandbox = FakeSandbox(registry, kwargs)
            registry.live[sandbox.object_id] = sandbox
            registry.created.append(sandbox)
            return sandbox

        async def list_(
            *, app_id: str | None = None, tags: dict[str, str] | None = None, **_: Any
        ) -> AsyncIterator[FakeSandbox]:
            for sandbox in list(registry.live.values()):
                if all(sandbox.tags.get(k) == v for k, v in (tags or {}).items()):
                    yield sandbox

        class _ListAio:
            def aio(self, *args: Any, **kwargs: Any) -> AsyncIterator[FakeSandbox]:
                inspect.signature(modal.Sandbox.list).bind(*args, **kwargs)
                return list_(*args, **kwargs)

        sandbox_cls = type(
            "FakeSandboxClass",
            (),
            {
                "create": _checked(modal.Sandbox.create, create, method=False),
                "list": _ListAio(),
            },
        )
        app_cls = type(
            "FakeAppClass", (), {"lookup": _checked(modal.App.lookup, lookup, method=False)}
        )

        def from_registry(tag: str, *args: Any, **kwargs: Any) -> tuple[str, str]:
            inspect.signature(modal.Image.from_registry).bind(tag, *args, **kwargs)
            return ("registry", tag)

        def from_dockerfile(path: str, *args: Any, **kwargs: Any) -> tuple[str, str]:
            inspect.signature(modal.Image.from_dockerfile).bind(path, *args, **kwargs)
            return ("dockerfile", path)

        def secret_from_name(name: str, **kwargs: Any) -> tuple[str, str]:
            inspect.signature(modal.Secret.from_name).bind(name, **kwargs)
            return ("secret", name)

        image_cls = type(
            "FakeImage",
            (),
            {
                "from_registry": staticmethod(from_registry),
                "from_dockerfile": staticmethod(from_dockerfile),
            },
        )
        secret_cls = type("FakeSecret", (), {"from_name": staticmethod(secret_from_name)})
        return ModalSDK(
            App=app_cls,
            Sandbox=sandbox_cls,
            Image=image_cls,
            Secret=secret_cls,
            exceptions=modal.exception,
            has_credentials=lambda: has_credentials,
        )


def test_fake_rejects_calls_the_real_sdk_would_reject() -> None:
    fake = FakeModal()
    sdk = fake.sdk()
    with pytest.raises(TypeError):
        anyio.run(lambda: sdk.Sandbox.create.aio(not_a_modal_option=1))
    sandbox = FakeSandbox(fake, {})
    with pytest.raises(TypeError):  # modal's exec takes workdir=, not cwd=
        anyio.run(lambda: sandbox.exec.aio("true", cwd="/"))
    with pytest.raises(TypeError):
        sdk.Secret.from_name("x", bogus=True)


def test_real_sdk_methods_have_aio_variants() -> None:
    # The backend calls `.aio` on these; if the SDK drops one, the backend would block or break.
    for method in (
        modal.App.lookup,
        modal.Sandbox.create,
        modal.Sandbox.list,
        modal.Sandbox.exec,
        modal.Sandbox.poll,
        modal.Sandbox.terminate,
        modal.sandbox.sandbox.SandboxFilesystem.read_bytes,
        modal.sandbox.sandbox.SandboxFilesystem.write_bytes,
        modal.sandbox.sandbox.SandboxFilesystem.copy_to_local,
    ):
        assert hasattr(method, "aio"), method
