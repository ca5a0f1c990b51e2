"""Property tests: output capping and path confinement."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

import pytest
from hermes_protocols import WorkspaceEscape
from hermes_sandbox._output import CappedOutput
from hermes_sandbox._paths import relative_slot_path, resolve_host_path
from hypothesis import given
from hypothesis import strategies as st


@given(chunks=st.lists(st.binary(max_size=300), max_size=20), limit=st.integers(2, 400))
def test_capped_output_keeps_head_and_tail(chunks: list[bytes], limit: int) -> None:
    out = CappedOutput(limit)
    for chunk in chunks:
        out.feed(chunk)
    data = b"".join(chunks)
    assert out.total == len(data)
    assert out.truncated == (len(data) > limit)
    text = out.render()
    if not out.truncated:
        assert text == data.decode("utf-8", "replace")
    else:
        head, tail = data[: limit // 2], data[len(data) - (limit - limit // 2) :]
        assert text.startswith(head.decode("utf-8", "replace"))
        assert text.endswith(tail.decode("utf-8", "replace"))
        assert f"{len(data) - limit} bytes omitted" in text


_part = st.sampled_from(["a", "b", "..", ".", "", "c.txt", "/"])


@given(parts=st.lists(_part, min_size=1, max_size=8))
def test_relative_paths_never_leave_the_workspace(parts: list[str]) -> None:
    path = "/".join(parts)
    norm = posixpath.normpath(path) if path else ""
    escapes = not path or posixpath.isabs(path) or norm == ".." or norm.startswith("../")
    if escapes:
        with pytest.raises(WorkspaceEscape):
            relative_slot_path(path, "/workspace")
        return
    rel = relative_slot_path(path, "/workspace")
    full = posixpath.normpath(posixpath.join("/workspace", rel))
    assert full == "/workspace" or full.startswith("/workspace/")


@given(rel=st.lists(st.sampled_from(["a", "b", ".."]), max_size=6))
def test_absolute_paths_inside_the_workspace_are_accepted(rel: list[str]) -> None:
    path = "/workspace/" + "/".join(rel)
    inside = posixpath.normpath(path).startswith("/workspace")
    inside = inside and not posixpath.normpath(path).startswith("/workspace.")
    if inside:
        assert not relative_slot_path(path, "/workspace").startswith("..")
    else:
        with pytest.raises(WorkspaceEscape):
            relative_slot_path(path, "/workspace")


def test_symlink_resolution_is_confined(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    os.symlink("/etc", root / "etc-link")
    os.symlink("d", root / "ok-link")
    assert resolve_host_path(str(root), "ok-link/x", "/workspace") == str(root / "d" / "x")
    with pytest.raises(WorkspaceEscape):
        resolve_host_path(str(root), "etc-link/passwd", "/workspace")
    with pytest.raises(WorkspaceEscape):
        resolve_host_path(str(root), "/workspace/../etc", "/workspace")
