"""The terminal_bench environment: Harbor/TB2 tasks, tests uploaded only at verification.

On a sandbox that runs images (docker) each task runs in its own image: the task's
``docker_image``, else the image built from its ``environment/`` Dockerfile, with ``/app`` as
the slot's workspace; tests go to ``/tests`` and the reward is read from
``/logs/verifier/reward.txt``. On bwrap/local slots (``host_userland``) the task runs in the
sandbox's own userland: ``/app``, ``/tests`` and ``/logs`` are remapped into the workspace, the
environment files are copied in, and a warning says the task image is not used. A verifier
that cannot run (its harness or interpreter missing: exit 126/127, no reward file) is an
infrastructure failure, never a 0.0 reward.
"""

from __future__ import annotations

import copy
import io
import logging
import re
import shlex
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from hermes_protocols import (
    AgentResult,
    ConfigError,
    FailureKind,
    Item,
    Message,
    RewardContext,
    Score,
    Slot,
    SlotImage,
)

from hermes_envs._convert import str_tuple
from hermes_envs.errors import DatasetError
from hermes_envs.shell import run_checked, write_files
from hermes_envs.terminal_bench.task import (
    TbTask,
    load_rows_jsonl,
    load_task_dir,
    sample_task_dirs,
)

log = logging.getLogger(__name__)

APP = "/app"
TESTS_DIR = ".hermes_tb_tests"
LOGS_DIR = ".hermes_tb_logs"
_ROOTS = re.compile(r"(?<![\w./~-])/(app|tests|logs)(?![\w.-])")
SYSTEM_PROMPT = (
    "You are an expert at solving tasks in a Linux terminal. Use your tools to complete the "
    "task; your work is checked by hidden tests after you finish."
)


@attrs.frozen(slots=True)
class TerminalBenchConfig:
    """Task sources (shipped samples, task directories, a JSONL of TB2 rows) and runtime.

    ``host_userland``: ``None`` (default) runs each task in its own image when the sandbox runs
    images and in the sandbox's userland otherwise; ``True`` always in the sandbox's userland;
    ``False`` always in the task's image (a sandbox without images is then refused).
    """

    task_dirs: tuple[str, ...] = attrs.field(default=(), converter=str_tuple)
    rows_path: str | None = None
    include_samples: bool = True
    host_userland: bool | None = None
    setup_timeout: float = 120.0
    toolsets: tuple[str, ...] = attrs.field(default=("terminal", "file"), converter=str_tuple)


def _remap_text(text: str, workspace: str | None) -> str:
    """Rewrite /app, /tests, /logs into the workspace (relative when ``workspace`` is None)."""

    def repl(match: re.Match[str]) -> str:
        root = match.group(1)
        base = "." if workspace is None else workspace
        if root == "app":
            return base
        return f"{base}/{TESTS_DIR if root == 'tests' else LOGS_DIR}"

    return _ROOTS.sub(repl, text)


def _remap_bytes(data: bytes, workspace: str) -> bytes:
    try:
        return _remap_text(data.decode("utf-8"), workspace).encode("utf-8")
    except UnicodeDecodeError:
        return data


def _tar(files: Mapping[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class TerminalBenchEnv:
    """Reward: ``/logs/verifier/reward.txt`` when test.sh writes it, else 1.0 iff exit 0."""

    name = "terminal_bench"

    def __init__(self, config: TerminalBenchConfig | None = None) -> None:
        self.config = config or TerminalBenchConfig()
        tasks: list[TbTask] = []
        dirs = [
            *(sample_task_dirs() if self.config.include_samples else []),
            *map(Path, self.config.task_dirs),
        ]
        tasks.extend(load_task_dir(d) for d in dirs)
        if self.config.rows_path:
            tasks.extend(load_rows_jsonl(Path(self.config.rows_path)))
        self.tasks: dict[str, TbTask] = {}
        for task in tasks:
            if task.name in self.tasks:
                raise ConfigError(f"terminal_bench: two tasks are named {task.name!r}")
            self.tasks[task.name] = task
        self._warned = False

    @property
    def toolsets(self) -> Sequence[str]:
        return self.config.toolsets

    @property
    def host_userland(self) -> bool:
        """Whether tasks run in the sandbox's userland (unset: yes, until :meth:`for_sandbox`)."""
        return self.config.host_userland is not False

    def for_sandbox(self, *, runs_images: bool) -> TerminalBenchEnv:
        """This environment with ``host_userland`` decided by the sandbox (when unset)."""
        wanted = self.config.host_userland
        if wanted is None:
            wanted = not runs_images
        if not wanted and not runs_images:
            raise ConfigError(
                "terminal_bench: host_userland=false runs each task in its own image, which "
                "this sandbox cannot; choose a sandbox that runs images (docker) or drop "
                "host_userland from the environment options"
            )
        env = copy.copy(self)
        env.config = attrs.evolve(self.config, host_userland=wanted)
        env._warned = False
        return env

    def items(self, *, seed: int, split: str = "train") -> Iterator[Item]:
        """Every task once, sorted by name then rotated by ``seed``."""
        names = sorted(self.tasks)
        if not names:
            return
        shift = seed % len(names)
        for name in names[shift:] + names[:shift]:
            yield Item(id=name, data={"task": name}, split=split)

    def task(self, item: Item) -> TbTask:
        try:
            return self.tasks[str(item.data["task"])]
        except KeyError:
            raise DatasetError(f"terminal_bench has no task {item.data.get('task')!r}") from None

    def image_for(self, item: Item) -> SlotImage | None:
        """The task's own image with its workspace at ``/app`` (``None`` in host userland):
        ``docker_image`` when the task names one, else its ``environment/`` build context."""
        if self.host_userland:
            return None
        task = self.task(item)
        if task.docker_image:
            return SlotImage(name=task.docker_image, workdir=APP)
        if task.dockerfile is not None:
            return SlotImage(
                build_context={**task.environment_files, "Dockerfile": task.dockerfile},
                workdir=APP,
                build_timeout_s=task.build_timeout,
            )
        raise DatasetError(
            f"terminal_bench task {task.name!r} has no image: no [environment] docker_image "
            "in task.toml and no environment/Dockerfile"
        )

    def prompt(self, item: Item) -> Sequence[Message]:
        text = self.task(item).instruction
        if self.host_userland:
            text = _remap_text(text, None)
        return (Message.system(SYSTEM_PROMPT), Message.user(text))

    def oracle_solution(self, item: Item) -> str:
        solution = self.task(item).solution
        if solution is None:
            raise DatasetError(f"{item.id}: the task ships no solution/solve.sh")
        return _remap_text(solution, None) if self.host_userland else solution

    async def setup_workspace(self, item: Item, slot: Slot) -> Mapping[str, Any]:
        task = self.task(item)
        image = task.docker_image or ("environment/Dockerfile" if task.dockerfile else None)
        if not self.host_userland:
            await run_checked(slot, "mkdir -p /logs/verifier", timeout=30, what="mkdir /logs")
            return {"task": task.name, "image": image, "host_userland": False}
        if not self._warned:
            self._warned = True
            log.warning(
                "terminal_bench: running tasks in the sandbox's own userland (host_userland); "
                "task images such as %r are not used and /app, /tests, /logs are remapped into "
                "the workspace. Run on a sandbox that runs images (docker) for fidelity.",
                image,
            )
        files = {k: _remap_bytes(v, slot.workspace) for k, v in task.environment_files.items()}
        await write_files(slot, files)
        return {"task": task.name, "image": image, "host_userland": True}

    async def verify(self, item: Item, result: AgentResult, ctx: RewardContext) -> Score:
        task = self.task(item)
        host = self.host_userland
        tests_dir = f"{ctx.workspace}/{TESTS_DIR}" if host else "/tests"
        logs_dir = f"{ctx.workspace}/{LOGS_DIR}" if host else "/logs"
        outside = None if host else "/"  # harness steps never depend on what the agent left
        files = task.test_files
        if host:
            files = {k: _remap_bytes(v, ctx.workspace) for k, v in files.items()}
        q_tests, q_logs = shlex.quote(tests_dir), shlex.quote(logs_dir)
        # The tar travels on stdin: no file API path outside the workspace is needed.
        upload = await ctx.exec(
            f"rm -rf {q_tests} {q_logs}/verifier && mkdir -p {q_tests} {q_logs}/verifier && "
            f"tar -xf - -C {q_tests}",
            timeout=self.config.setup_timeout,
            cwd=outside,
            stdin=_tar(files),
        )
        if not upload.ok:
            return _infra(f"uploading the tests failed: {upload.stderr[-1000:]}")
        run = await ctx.exec(
            f"bash {q_tests}/test.sh", timeout=task.verifier_timeout, cwd=None if host else APP
        )
        if run.timed_out:
            return Score(
                reward=0.0,
                metrics={"test_timed_out": 1.0},
                failure=FailureKind.MODEL,
                details=f"test.sh timed out after {task.verifier_timeout:g}s",
            )
        reward_file = f"{logs_dir}/verifier/reward.txt"
        check = await ctx.exec(f"cat {shlex.quote(reward_file)}", timeout=30, cwd=outside)
        if not check.ok and run.exit_code in _CANNOT_RUN:
            return await self._cannot_run(ctx, run.exit_code, run.stdout + run.stderr)
        if check.ok:
            text = check.stdout.strip()
            try:
                reward = float(text)
            except ValueError:
                return _infra(f"reward.txt holds {text[:100]!r}, not a number")
            source = 1.0
        else:
            reward = 1.0 if run.exit_code == 0 else 0.0
            source = 0.0
        return Score(
            reward=reward,
            metrics={"test_exit_code": float(run.exit_code), "reward_from_file": source},
            failure=None if reward > 0 else FailureKind.MODEL,
            details=(run.stdout + run.stderr)[-2000:] if reward <= 0 else "",
        )

    async def _cannot_run(self, ctx: RewardContext, code: int, output: str) -> Score:
        """test.sh or a command it needs could not be started (exit 126/127): infrastructure,
        unless the agent removed the task's ``/app`` (then the model's failure)."""
        if not self.host_userland:
            gone = await ctx.exec(f"test -d {APP}", timeout=30, cwd="/")
            if gone.exit_code == 1:
                return Score(
                    reward=0.0,
                    failure=FailureKind.MODEL,
                    details=f"{APP} is no longer a directory, so the tests could not run",
                )
        lines = [line for line in output.splitlines() if line.strip()]
        last = lines[-1].strip()[:300] if lines else "no output"
        where = "sandbox's userland" if self.host_userland else "task's image"
        return _infra(f"test.sh could not run (exit {code}): {last}; the {where} lacks it")


#: exit codes of a command that could not be started (not executable / not found)
_CANNOT_RUN = (126, 127)


def _infra(details: str) -> Score:
    return Score(reward=0.0, failure=FailureKind.INFRASTRUCTURE, details=details)
