"""What an item's own image brings into its slot: its user, and the files of its workdir.

An image host's workspace is a directory on this machine like any slot's (so its files are
read and written with the same ``O_NOFOLLOW`` walk), bound over the image's workdir: the files
the image has there (a task's ``/app``) are copied into it first from a created, never
started container (``docker cp``), extracted with :mod:`tarfile`'s ``data`` filter (no device
files, no setuid bits, no link leaving the directory: such members are skipped) and owned by
the slot's user: the image's own (``USER``; root when it names none).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import tarfile
import uuid
from types import TracebackType

import anyio
from hermes_protocols import SandboxError

from hermes_sandbox.backends.docker_cli import docker_cli, error_text

logger = logging.getLogger(__name__)
_CLI_TIMEOUT_S = 120.0


def _lookup(table: str, name: str, field: int) -> int | None:
    """Field ``field`` (an id) of entry ``name`` (a name or an id) of a passwd/group text."""
    for line in table.splitlines():
        fields = line.split(":")
        if len(fields) > field and name in (fields[0], fields[2]) and fields[field].isdigit():
            return int(fields[field])
    return None


def parse_user(spec: str, passwd: str, group: str) -> tuple[int, int]:
    """(uid, gid) of a Docker ``USER`` (``name``, ``uid``, ``name:group``, ...), names looked
    up in the image's ``passwd`` and ``group`` files; root when ``spec`` is empty."""
    user, _, grp = spec.partition(":")
    if user in ("", "root"):
        user = "0"
    uid = int(user) if user.isdigit() else _lookup(passwd, user, 2)
    if uid is None:
        raise SandboxError(f"the image's USER {spec!r} is not in its /etc/passwd")
    if not grp:
        return uid, _lookup(passwd, str(uid), 3) or (0 if uid == 0 else uid)
    gid = int(grp) if grp.isdigit() else _lookup(group, grp, 2)
    return uid, uid if gid is None else gid


def _skip_unsafe(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError as exc:
        logger.info("hermes-sandbox: not copied from the image: %s", exc)
        return None


def extract_tree(tar_path: str, dest: str, owner: tuple[int, int]) -> None:
    """Extract ``tar_path`` into ``dest`` (safely, see the module) owned by ``owner``."""
    with tarfile.open(tar_path) as tar:
        tar.extractall(dest, filter=_skip_unsafe)
    for top, dirs, files in os.walk(dest):
        for name in (*dirs, *files):
            os.lchown(os.path.join(top, name), *owner)


class ImageFiles:
    """A created, never started container of ``image`` whose files can be read."""

    def __init__(self, docker: str, image: str) -> None:
        self._docker = docker
        self._image = image
        self._name = f"hermes-files-{uuid.uuid4().hex[:12]}"

    async def __aenter__(self) -> ImageFiles:
        args = ["create", "--name", self._name, "--entrypoint", "/.hermes-never-run", self._image]
        done = await docker_cli(self._docker, args, timeout=_CLI_TIMEOUT_S)
        if done.returncode != 0:
            raise SandboxError(f"docker create {self._image} failed: {error_text(done)}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with anyio.CancelScope(shield=True):
            await docker_cli(self._docker, ["rm", "-f", self._name], timeout=_CLI_TIMEOUT_S)

    async def text(self, path: str) -> str:
        """The file ``path`` of the image ("" when it has none)."""
        args = ["cp", f"{self._name}:{path}", "-"]
        done = await docker_cli(self._docker, args, timeout=_CLI_TIMEOUT_S)
        if done.returncode != 0:
            return ""
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
            member = tar.next()
            handle = tar.extractfile(member) if member is not None else None
            return handle.read().decode(errors="replace") if handle is not None else ""

    async def user(self) -> tuple[int, int]:
        """The (uid, gid) the image runs as."""
        args = ["image", "inspect", "-f", "{{.Config.User}}", self._image]
        done = await docker_cli(self._docker, args, timeout=_CLI_TIMEOUT_S)
        if done.returncode != 0:
            raise SandboxError(f"docker image inspect {self._image} failed: {error_text(done)}")
        spec = done.stdout.decode().strip()
        if spec.split(":")[0] in ("", "root", "0"):
            return parse_user(spec, "", "")
        return parse_user(spec, await self.text("/etc/passwd"), await self.text("/etc/group"))

    async def copy_dir(self, path: str, dest: str, owner: tuple[int, int]) -> None:
        """Copy what the image has in directory ``path`` into ``dest`` (nothing when it has
        no such directory), owned by ``owner``."""
        scratch = f"{dest.rstrip('/')}.tar"
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            try:
                with anyio.fail_after(_CLI_TIMEOUT_S):
                    done = await anyio.run_process(
                        [self._docker, "cp", f"{self._name}:{path.rstrip('/')}/.", "-"],
                        stdout=fd,
                        stderr=subprocess.PIPE,
                        check=False,
                    )
            finally:
                os.close(fd)
            if done.returncode == 0:
                await anyio.to_thread.run_sync(extract_tree, scratch, dest, owner)
            elif b"Could not find the file" not in done.stderr:
                raise SandboxError(
                    f"copying {path} out of {self._image} failed: {error_text(done)}"
                )
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(scratch)
