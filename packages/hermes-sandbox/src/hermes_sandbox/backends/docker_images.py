"""The images of the docker backend: found locally, pulled, or built from a build context.

A named image is used when the Docker host has it and pulled otherwise. A build context (a
:class:`~hermes_protocols.SlotImage` without a name) is built once per backend and tagged
``hermes-image:<sha256 of the context>``; Docker's layer cache makes a rebuild of an unchanged
context cheap. *Aliases* map image names to local images, for a Docker host that cannot pull
(an offline CI runner): they apply to named images and to the ``FROM`` lines of a built
Dockerfile. An image that cannot be had raises :class:`~hermes_protocols.ImageUnavailable`
with one line naming it.
"""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import tarfile
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

import anyio
from hermes_protocols import ImageUnavailable, SlotImage

BUILT_REPOSITORY = "hermes-image"
_Maker = Callable[[], Awaitable[None]]
_FROM = re.compile(r"^(\s*FROM\s+(?:--\S+\s+)*)(\S+)", re.IGNORECASE | re.MULTILINE)


def alias_pairs(
    value: Mapping[str, str] | Iterable[tuple[str, str]],
) -> tuple[tuple[str, str], ...]:
    """Aliases as sorted ``(name, local image)`` pairs (a hashable config field)."""
    pairs = value.items() if isinstance(value, Mapping) else value
    return tuple(sorted((str(k), str(v)) for k, v in pairs))


def rewrite_from(dockerfile: str, aliases: Mapping[str, str]) -> str:
    """``dockerfile`` with each ``FROM`` image that has an alias replaced by it."""

    def repl(match: re.Match[str]) -> str:
        return match.group(1) + aliases.get(match.group(2), match.group(2))

    return _FROM.sub(repl, dockerfile)


def context_tar(files: Sequence[tuple[str, bytes]]) -> bytes:
    """A reproducible tar of a build context (sorted, fixed owner, mode and time)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in sorted(files):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _tail(stderr: bytes) -> str:
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else "no error output"


class DockerImages:
    """Resolves :class:`SlotImage` requests to local image references, once per image."""

    def __init__(
        self,
        docker: str,
        aliases: Mapping[str, str],
        *,
        pull_timeout_s: float,
        alias_option: str,
    ) -> None:
        self._docker = docker
        self._aliases = dict(aliases)
        self._pull_timeout_s = pull_timeout_s
        self._alias_option = alias_option
        self._ready: dict[str, str] = {}
        self._locks: dict[str, anyio.Lock] = {}

    async def resolve(self, image: SlotImage) -> str:
        """The local reference of ``image``: found, pulled or built (memoized)."""
        if image.name is not None:
            return await self.named(image.name)
        files = dict(image.build_context)
        dockerfile = rewrite_from(files["Dockerfile"].decode(errors="replace"), self._aliases)
        files["Dockerfile"] = dockerfile.encode()
        tar = await anyio.to_thread.run_sync(context_tar, sorted(files.items()))
        tag = f"{BUILT_REPOSITORY}:{hashlib.sha256(tar).hexdigest()[:24]}"
        what = f"{tag} (FROM {', '.join(m.group(2) for m in _FROM.finditer(dockerfile))})"
        return await self._once(tag, lambda: self._build(tag, what, tar, image.build_timeout_s))

    async def named(self, name: str) -> str:
        """``name`` (or its alias) once the Docker host has it, pulling it when it has not."""
        local = self._aliases.get(name, name)
        return await self._once(local, lambda: self._pull(name, local))

    async def _once(self, key: str, make: _Maker) -> str:
        if key in self._ready:
            return self._ready[key]
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            if key not in self._ready:
                await make()
                self._ready[key] = key
        return key

    async def _run(
        self, args: Sequence[str], timeout: float, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes] | None:
        """The finished CLI call, or ``None`` when it timed out."""
        with anyio.move_on_after(timeout):
            return await anyio.run_process([self._docker, *args], input=stdin, check=False)
        return None

    async def _pull(self, name: str, local: str) -> None:
        try:
            found = await self._run(["image", "inspect", "--format", "{{.Id}}", local], 60)
            if found is not None and found.returncode == 0:
                return
            pulled = await self._run(["pull", "-q", local], self._pull_timeout_s)
        except OSError as exc:
            raise ImageUnavailable(f"image {name!r}: cannot run the docker CLI: {exc}") from exc
        if pulled is not None and pulled.returncode == 0:
            return
        why = (
            f"`docker pull` timed out after {self._pull_timeout_s:g}s"
            if pulled is None
            else f"`docker pull` failed: {_tail(pulled.stderr)}"
        )
        shown = name if local == name else f"{name} (alias of {local})"
        raise ImageUnavailable(
            f"image {shown!r} is not on this Docker host and {why}; pull or build it, or map "
            f"it to a local image with {self._alias_option}"
        )

    async def _build(self, tag: str, what: str, tar: bytes, timeout: float) -> None:
        """Build ``tag`` (``what`` names it and its FROM images in errors)."""
        try:
            built = await self._run(["build", "-q", "-t", tag, "-"], timeout, stdin=tar)
        except OSError as exc:
            raise ImageUnavailable(f"image {what}: cannot run the docker CLI: {exc}") from exc
        if built is None:
            raise ImageUnavailable(f"building image {what} took longer than {timeout:g}s")
        if built.returncode != 0:
            raise ImageUnavailable(
                f"building image {what} failed: {_tail(built.stderr)}; a FROM image this host "
                f"cannot pull can be mapped to a local one with {self._alias_option}"
            )
