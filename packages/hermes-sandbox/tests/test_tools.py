"""The agent's tools against every backend: terminal, read/write/patch, search."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import jsonschema
import pytest
from hermes_protocols import (
    ConfigError,
    SlotPool,
    Tool,
    ToolArgumentError,
    Toolset,
)
from hermes_sandbox.tools import (
    default_toolsets,
    resolve_tools,
)

# The tools use only the Slot protocol, which the conformance suite checks on every backend;
# running them on the two local backends keeps the suite fast.
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.parametrize("backend_case", ["local", "bwrap"], indirect=True),
]


@pytest.fixture
async def run(make_pool: Callable[..., SlotPool]) -> AsyncIterator[Any]:
    """``await run(name, **arguments)`` calls a tool of both toolsets on one slot."""
    async with make_pool(slots_per_host=1, max_hosts=1) as pool:
        slot = await pool.acquire("tools")
        tools = {tool.schema.name: tool for tool in resolve_tools(["terminal", "file"])}

        async def call(name: str, **arguments: Any) -> Any:
            return await tools[name](slot, arguments)

        call.slot = slot  # type: ignore[attr-defined]
        yield call
        await pool.release(slot)


def _json(result: Any) -> Any:
    return json.loads(result.content)


async def test_terminal_persists_cd_and_exports(run: Any) -> None:
    first = _json(await run("terminal", command="mkdir -p a/b && cd a/b && export FOO=bar"))
    assert first["exit_code"] == 0
    second = _json(await run("terminal", command='pwd; echo "$FOO"'))
    assert second["output"].split() == [f"{run.slot.workspace}/a/b", "bar"]
    third = _json(await run("terminal", command="cd .. && exit 3"))
    assert third["exit_code"] == 3
    fourth = _json(await run("terminal", command="pwd; echo err >&2"))
    assert fourth["output"] == f"{run.slot.workspace}/a\nerr\n"
    other = _json(await run("terminal", command="pwd", workdir="a/b"))
    assert other["output"].strip() == f"{run.slot.workspace}/a/b"


async def test_terminal_timeout_and_capping(run: Any) -> None:
    result = await run("terminal", command="echo before; sleep 30", timeout=1)
    payload = _json(result)
    assert result.is_error
    assert payload["exit_code"] == 124
    assert "timed out" in payload["error"]
    assert payload["output"] == "before\n"
    big = await run("terminal", command="seq 1 200000")
    text = _json(big)["output"]
    assert big.metadata["truncated"]
    assert text.startswith("1\n2\n")
    assert text.rstrip().endswith("200000")
    assert "output truncated" in text


async def test_terminal_argument_errors(run: Any) -> None:
    with pytest.raises(ToolArgumentError, match="command"):
        await run("terminal")
    with pytest.raises(ToolArgumentError, match="timeout"):
        await run("terminal", command="true", timeout=0)
    with pytest.raises(ToolArgumentError, match="integer"):
        await run("terminal", command="true", timeout="soon")


async def test_write_then_read_with_numbered_lines_and_paging(run: Any) -> None:
    body = "".join(f"line {i}\n" for i in range(1, 13))
    written = _json(await run("write_file", path="dir/notes.txt", content=body))
    assert written["bytes_written"] == len(body)
    first = await run("read_file", path="dir/notes.txt", limit=5)
    assert first.content.splitlines()[:5] == [f"{i}|line {i}" for i in range(1, 6)]
    assert "use offset=6" in first.content
    rest = await run("read_file", path="dir/notes.txt", offset=10)
    assert rest.content.splitlines() == ["10|line 10", "11|line 11", "12|line 12"]
    past = await run("read_file", path="dir/notes.txt", offset=99)
    assert past.is_error
    missing = await run("read_file", path="nope.txt")
    assert missing.is_error
    assert "not found" in _json(missing)["error"]
    escape = await run("read_file", path="../../etc/passwd")
    assert escape.is_error
    assert "denied" in _json(escape)["error"]
    await run.slot.write_file("blob.bin", b"\x00\x01\x02")
    assert (await run("read_file", path="blob.bin")).is_error
    assert (await run("write_file", path="/etc/evil", content="x")).is_error


async def test_patch_unique_ambiguous_missing_and_replace_all(run: Any) -> None:
    await run("write_file", path="code.py", content="a = 1\nb = 1\nc = 2\n")
    ambiguous = await run("patch", path="code.py", old_string="= 1", new_string="= 9")
    assert ambiguous.is_error
    assert "2 times" in _json(ambiguous)["error"]
    missing = await run("patch", path="code.py", old_string="zzz", new_string="y")
    assert missing.is_error
    assert "not found" in _json(missing)["error"]
    done = _json(await run("patch", path="code.py", old_string="c = 2", new_string="c = 3"))
    assert done["replacements"] == 1
    assert "-c = 2\n+c = 3\n" in done["diff"]
    assert done["diff"].startswith("--- a/code.py\n+++ b/code.py\n")
    every = await run("patch", path="code.py", old_string="= 1", new_string="= 0", replace_all=True)
    assert _json(every)["replacements"] == 2
    assert await run.slot.read_file("code.py") == b"a = 0\nb = 0\nc = 3\n"
    wrong_mode = await run("patch", mode="patch", path="code.py", old_string="a", new_string="b")
    assert wrong_mode.is_error


async def test_search_content_and_files_with_pagination(run: Any) -> None:
    for i in range(5):
        await run("write_file", path=f"src/m{i}.py", content=f"def f{i}():\n    return {i}\n")
    await run("write_file", path="README.md", content="def not python\n")
    await run("write_file", path=".git/config", content="def hidden\n")
    content = _json(await run("search_files", pattern=r"def f[0-9]", file_glob="*.py", limit=3))
    assert content["total"] == 5
    assert len(content["matches"]) == 3
    assert content["next_offset"] == 3
    assert all(":1:def f" in m for m in content["matches"])
    page2 = _json(await run("search_files", pattern=r"def f[0-9]", file_glob="*.py", offset=3))
    assert len(page2["matches"]) == 2
    assert "next_offset" not in page2
    everything = _json(await run("search_files", pattern="^def"))
    assert everything["total"] == 6  # .git is skipped
    files = _json(await run("search_files", pattern="*.md", target="files"))
    assert files["files"] == ["./README.md"]
    none = _json(await run("search_files", pattern="absent-text"))
    assert none["total"] == 0
    bad = await run("search_files", pattern="(", target="content")
    assert bad.is_error


def test_toolsets_and_schemas_are_valid(backend_case: Any) -> None:
    toolsets = default_toolsets()
    assert sorted(toolsets) == ["file", "terminal"]
    names = {name: [t.schema.name for t in ts.tools] for name, ts in toolsets.items()}
    assert names == {
        "terminal": ["terminal"],
        "file": ["read_file", "write_file", "patch", "search_files"],
    }
    for ts in toolsets.values():
        assert isinstance(ts, Toolset)
        for tool in ts.tools:
            assert isinstance(tool, Tool)
            jsonschema.Draft202012Validator.check_schema(tool.schema.parameters)
            assert tool.schema.parameters["required"]
    with pytest.raises(ConfigError, match="unknown toolset"):
        resolve_tools(["terminal", "browser"])
    assert [t.schema.name for t in resolve_tools(["terminal", "terminal"])] == ["terminal"]


async def test_search_path_is_never_an_option_and_failures_are_errors(run: Any) -> None:
    """Issue 24 finding 10: ``path="-fprint"`` reached find as an action, and find's errors
    came back as "0 results"."""
    await run("write_file", path="a.md", content="x\n")
    planted = await run("search_files", pattern="*", target="files", path="-fprint")
    assert planted.is_error
    assert "-fprint" in _json(planted)["error"]
    listing = _json(await run("terminal", command="ls -A"))["output"].split()
    assert listing == ["a.md"]  # find wrote no file (".hermes" is made after ls)
    for target in ("files", "content"):
        missing = await run("search_files", pattern="x", target=target, path="no-such-dir")
        assert missing.is_error, target
        assert "No such file or directory" in _json(missing)["error"]
    found = _json(await run("search_files", pattern="*.md", target="files", path="."))
    assert found["files"] == ["./a.md"]
