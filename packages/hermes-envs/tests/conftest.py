"""Test fixtures: a real subprocess-backed slot pool, terminal/file toolsets, scripted agents.

hermes-envs may not import hermes_sandbox, so these are small but real: every slot is its own
temp directory, commands run with ``bash -c`` in their own process group with a timeout, files
are moved as bytes.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import pytest
from hermes_protocols import (
    AcquireTimeout,
    AgentResult,
    ExecResult,
    Message,
    PoolStats,
    SandboxError,
    Slot,
    StopReason,
    ToolCall,
    ToolExecutor,
    ToolResult,
    ToolSchema,
    WorkspaceEscape,
)

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


class LocalSlot:
    """A slot in a temp directory. ``die_after_ops`` makes it fail like a crashed host."""

    def __init__(self, slot_id: str, root: Path, die_after_ops: int | None = None) -> None:
        self._id = slot_id
        self.root = root
        self.die_after_ops = die_after_ops
        self.ops = 0
        self.dead = False

    @property
    def slot_id(self) -> str:
        return self._id

    @property
    def workspace(self) -> str:
        return str(self.root)

    def _tick(self) -> None:
        self.ops += 1
        if self.die_after_ops is not None and self.ops > self.die_after_ops:
            self.dead = True
        if self.dead:
            raise SandboxError(f"slot {self._id}: host is gone")

    def _path(self, path: str) -> Path:
        full = (self.root / path).resolve()
        if not full.is_relative_to(self.root.resolve()):
            raise WorkspaceEscape(f"{path!r} is outside the workspace")
        return full

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        self._tick()
        full_env = {"PATH": SYSTEM_PATH, "HOME": str(self.root), "LANG": "C.UTF-8"}
        full_env.update(env or {})
        start = anyio.current_time()
        process = await anyio.open_process(
            ["bash", "-c", command],
            cwd=str(self._path(cwd) if cwd else self.root),
            env=full_env,
            stdin=None if stdin is None else -1,
            start_new_session=True,
        )
        out = bytearray()
        err = bytearray()

        async def pump(stream: Any, sink: bytearray) -> None:
            async for chunk in stream:
                sink.extend(chunk)

        timed_out = False
        try:
            with anyio.move_on_after(timeout) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(pump, process.stdout, out)
                    tg.start_soon(pump, process.stderr, err)
                    if stdin is not None and process.stdin is not None:
                        await process.stdin.send(stdin)
                        await process.stdin.aclose()
                await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            if process.returncode is None:
                with anyio.CancelScope(shield=True):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    await process.wait()
            await process.aclose()
        return ExecResult(
            exit_code=124 if timed_out else (process.returncode or 0),
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            timed_out=timed_out,
            duration_s=anyio.current_time() - start,
        )

    async def read_file(self, path: str) -> bytes:
        self._tick()
        try:
            return await anyio.Path(self._path(path)).read_bytes()
        except OSError as exc:
            raise FileNotFoundError(f"{path}: {exc}") from exc

    async def write_file(self, path: str, data: bytes) -> None:
        self._tick()
        target = anyio.Path(self._path(path))
        await target.parent.mkdir(parents=True, exist_ok=True)
        await target.write_bytes(data)

    async def upload(self, local_path: str, remote_path: str) -> None:
        await self.write_file(remote_path, await anyio.Path(local_path).read_bytes())

    async def download(self, remote_path: str, local_path: str) -> None:
        target = anyio.Path(local_path)
        await target.parent.mkdir(parents=True, exist_ok=True)
        await target.write_bytes(await self.read_file(remote_path))


class LocalPool:
    """A fixed set of temp-dir slots. The first ``doomed`` acquisitions get dying slots."""

    def __init__(
        self, root: Path, size: int = 4, *, doomed: int = 0, die_after_ops: int = 1
    ) -> None:
        self.root = root
        self.size = size
        self.doomed = doomed
        self.die_after_ops = die_after_ops
        self._free: list[int] = list(range(size))
        self._ready = anyio.Condition()
        self.acquires = 0
        self.released: list[str] = []
        self.busy: dict[str, int] = {}

    async def __aenter__(self) -> LocalPool:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    async def acquire(self, trajectory_id: str, *, timeout: float | None = None) -> Slot:
        async with self._ready:
            with anyio.move_on_after(timeout or 30.0):
                while not self._free:
                    await self._ready.wait()
            if not self._free:
                raise AcquireTimeout(f"no free slot for {trajectory_id}")
            index = self._free.pop()
        self.acquires += 1
        root = self.root / f"slot{index}"
        root.mkdir(parents=True, exist_ok=True)
        die = self.die_after_ops if self.acquires <= self.doomed else None
        slot = LocalSlot(f"slot{index}-{self.acquires}", root, die)
        self.busy[slot.slot_id] = index
        return slot

    async def release(self, slot: Slot, *, reset: bool = True) -> None:
        index = self.busy.pop(slot.slot_id)
        if reset:
            await anyio.run_process(["rm", "-rf", str(self.root / f"slot{index}")])
        self.released.append(slot.slot_id)
        async with self._ready:
            self._free.append(index)
            self._ready.notify()

    def stats(self) -> PoolStats:
        free = len(self._free)
        return PoolStats(1, self.size, free, self.size - free, self.acquires)


class _TerminalTool:
    schema = ToolSchema(
        "terminal",
        "Run a bash command in the workspace.",
        {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    )

    async def __call__(self, slot: Slot, arguments: Mapping[str, Any]) -> ToolResult:
        result = await slot.exec(str(arguments["command"]), timeout=120)
        return ToolResult(result.stdout + result.stderr, is_error=not result.ok)


class _ReadFileTool:
    schema = ToolSchema(
        "read_file",
        "Read a file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )

    async def __call__(self, slot: Slot, arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult((await slot.read_file(str(arguments["path"]))).decode())


class NamedToolset:
    def __init__(self, name: str, tools: Sequence[Any]) -> None:
        self._name = name
        self._tools = tuple(tools)

    @property
    def name(self) -> str:
        return self._name

    @property
    def tools(self) -> Sequence[Any]:
        return self._tools


class OracleAgent:
    """Runs a known solution script through the executor's ``terminal`` tool."""

    def __init__(
        self,
        script: str,
        tool: str = "terminal",
        argument: str = "command",
        *,
        catch_tool_errors: bool = False,
    ) -> None:
        self.script = script
        self.tool = tool
        self.argument = argument
        self.catch_tool_errors = catch_tool_errors
        self.calls = 0
        self.seen_tools: list[tuple[str, ...]] = []

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        self.calls += 1
        self.seen_tools.append(tuple(sorted(t.name for t in tools)))
        assert self.tool in {t.name for t in tools}
        call = ToolCall("call_0", self.tool, _json({self.argument: self.script}))
        try:
            output = await executor(self.tool, {self.argument: self.script})
        except Exception as exc:
            if not self.catch_tool_errors:
                raise
            output = ToolResult(f"tool failed: {exc}", is_error=True)
        return AgentResult(
            messages=[
                *messages,
                Message.assistant(None, (call,)),
                Message.tool(output.content, "call_0", self.tool),
                Message.assistant("done"),
            ],
            stop_reason=StopReason.FINAL_ANSWER,
            turns=2,
        )


class IdleAgent:
    """Does nothing and answers at once."""

    async def run(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        executor: ToolExecutor,
        seed: int | None = None,
    ) -> AgentResult:
        return AgentResult(
            messages=[*messages, Message.assistant("I did nothing.")],
            stop_reason=StopReason.FINAL_ANSWER,
            turns=1,
        )


def _json(value: object) -> str:
    import json

    return json.dumps(value)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def toolsets() -> list[NamedToolset]:
    return [NamedToolset("terminal", [_TerminalTool()]), NamedToolset("file", [_ReadFileTool()])]


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[LocalPool]:
    async with LocalPool(tmp_path / "slots", size=4) as p:
        yield p


@pytest.fixture
def make_pool(tmp_path: Path) -> Any:
    def make(**kwargs: Any) -> LocalPool:
        return LocalPool(tmp_path / "slots", **kwargs)

    return make


@pytest.fixture
def oracle_agent() -> type[OracleAgent]:
    return OracleAgent


@pytest.fixture
def idle_agent() -> IdleAgent:
    return IdleAgent()
