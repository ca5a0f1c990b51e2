"""Terminal-Bench 2 / Harbor tasks: task directories and dataset rows, in one shape."""

from __future__ import annotations

import base64
import io
import json
import tarfile
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import attrs

from hermes_envs.errors import DatasetError

SKIP_ENV_FILES = ("Dockerfile", "docker-compose.yaml", "docker-compose.yml", ".dockerignore")


def _bytes_map(value: Mapping[str, bytes]) -> dict[str, bytes]:
    return dict(value)


@attrs.frozen(slots=True)
class TbTask:
    """One task: what the agent reads, the files it starts with, and the hidden tests.

    ``environment_files`` are the build context (relative paths, Dockerfile excluded),
    ``dockerfile`` the context's ``Dockerfile`` (built within ``build_timeout``) and
    ``test_files`` hold ``test.sh`` and whatever it needs, uploaded only at verification.
    ``docker_image`` is a prebuilt image with the environment in it (Harbor: it replaces the
    build).
    """

    name: str
    instruction: str
    test_files: Mapping[str, bytes] = attrs.field(converter=_bytes_map)
    environment_files: Mapping[str, bytes] = attrs.field(converter=_bytes_map, factory=dict)
    docker_image: str | None = None
    dockerfile: bytes | None = None
    build_timeout: float = 600.0
    verifier_timeout: float = 600.0
    agent_timeout: float = 1800.0
    solution: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if "test.sh" not in self.test_files:
            raise DatasetError(f"task {self.name!r} has no tests/test.sh")


def _read_tree(root: Path) -> dict[str, bytes]:
    if not root.is_dir():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def load_task_dir(path: Path) -> TbTask:
    """A Harbor task directory: instruction.md, task.toml, tests/, environment/, solution/."""
    try:
        instruction = (path / "instruction.md").read_text(encoding="utf-8")
        config = tomllib.loads((path / "task.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DatasetError(f"{path}: not a Harbor task directory: {exc}") from exc
    tree = _read_tree(path / "environment")
    env_files = {k: v for k, v in tree.items() if k not in SKIP_ENV_FILES}
    solve = path / "solution" / "solve.sh"
    environment = config.get("environment", {})
    return TbTask(
        name=path.name,
        instruction=instruction,
        test_files=_read_tree(path / "tests"),
        environment_files=env_files,
        docker_image=environment.get("docker_image"),
        dockerfile=tree.get("Dockerfile"),
        build_timeout=float(environment.get("build_timeout_sec", 600.0)),
        verifier_timeout=float(config.get("verifier", {}).get("timeout_sec", 600.0)),
        agent_timeout=float(config.get("agent", {}).get("timeout_sec", 1800.0)),
        solution=solve.read_text(encoding="utf-8") if solve.is_file() else None,
        metadata=dict(config.get("metadata", {})),
    )


def _untar(value: Any, what: str, name: str, prefix: str) -> dict[str, bytes]:
    if value in (None, "", b""):
        return {}
    raw = value if isinstance(value, bytes) else base64.b64decode(str(value))
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(raw)) as archive:
            for member in archive.getmembers():
                rel = member.name.removeprefix("./")
                if not member.isfile():
                    continue
                if rel.startswith("/") or ".." in rel.split("/"):
                    raise DatasetError(f"{name}: {what} has an unsafe path {member.name!r}")
                handle = archive.extractfile(member)
                if handle is not None:
                    files[rel.removeprefix(prefix)] = handle.read()
    except tarfile.TarError as exc:
        raise DatasetError(f"{name}: {what} is not a tar archive: {exc}") from exc
    return files


def parse_row(row: Mapping[str, Any]) -> TbTask:
    """A TB2 dataset row: instruction, tests_tar, test_sh, environment_tar, docker_image.

    Archives may be bytes or base64 text (plain or gzip tar)."""
    name = str(row.get("task_id") or row.get("name") or row.get("id") or "")
    if not name or not isinstance(row.get("instruction"), str):
        raise DatasetError(f"row {name or '<unnamed>'}: needs a task id and an instruction")
    tests = _untar(row.get("tests_tar"), "tests_tar", name, "tests/")
    if isinstance(row.get("test_sh"), str) and row["test_sh"]:
        tests["test.sh"] = row["test_sh"].encode()
    tree = _untar(row.get("environment_tar"), "environment_tar", name, "environment/")
    return TbTask(
        name=name,
        instruction=row["instruction"],
        test_files=tests,
        environment_files={k: v for k, v in tree.items() if k not in SKIP_ENV_FILES},
        docker_image=row.get("docker_image") or None,
        dockerfile=tree.get("Dockerfile"),
        verifier_timeout=float(row.get("verifier_timeout_sec") or 600.0),
        agent_timeout=float(row.get("agent_timeout_sec") or 1800.0),
        solution=row.get("solution") or None,
    )


def load_rows_jsonl(path: Path) -> list[TbTask]:
    tasks = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                tasks.append(parse_row(json.loads(line)))
            except (json.JSONDecodeError, DatasetError) as exc:
                raise DatasetError(f"{path}:{number}: {exc}") from exc
    return tasks


def sample_task_dirs() -> list[Path]:
    """The task directories shipped with hermes-envs."""
    root = Path(str(resources.files("hermes_envs") / "data" / "terminal_bench"))
    return sorted(p for p in root.iterdir() if (p / "task.toml").is_file())
