from __future__ import annotations

import json
from pathlib import Path

import pytest
from hermes_envs import DatasetError
from hermes_protocols import Item
from hermes_rollouts import DatasetEnvironment, load_dataset


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_valid_lines_become_items_with_their_fields(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "d.jsonl",
        [
            json.dumps({"prompt": "list files", "cwd": "work", "docker_image": "python:3.11"}),
            "",
            json.dumps({"prompt": "say hi", "id": 7}),
        ],
    )
    loaded = load_dataset(path, skip_bad_lines=False)
    assert [i.data["prompt"] for i in loaded.items] == ["list files", "say hi"]
    assert loaded.items[0].data["cwd"] == "work"
    assert loaded.items[0].data["line"] == 1
    assert loaded.items[1].id == "7"
    assert loaded.bad_lines == ()


def test_bad_lines_are_reported_with_line_numbers(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "d.jsonl",
        [
            json.dumps({"prompt": "ok"}),
            "{not json",
            json.dumps({"prompt": ""}),
            json.dumps(["prompt"]),
            json.dumps({"prompt": "x", "cwd": 3}),
        ],
    )
    with pytest.raises(DatasetError) as info:
        load_dataset(path, skip_bad_lines=False)
    message = str(info.value)
    for lineno in (2, 3, 4, 5):
        assert f"line {lineno}:" in message
    assert "line 1:" not in message
    assert "--skip-bad-lines" in message
    assert "line 2: not valid JSON (Expecting property name enclosed in double quotes at " in (
        message
    )
    loaded = load_dataset(path, skip_bad_lines=True)
    assert len(loaded.items) == 1
    assert [b.lineno for b in loaded.bad_lines] == [2, 3, 4, 5]


def test_an_unterminated_string_says_where_it_starts(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", [json.dumps({"prompt": "ok"}), '{"prompt": "open}'])
    (bad,) = load_dataset(path, skip_bad_lines=True).bad_lines
    assert bad.reason == "not valid JSON (Unterminated string starting at column 12)"


def test_ids_survive_reordering_and_repeated_lines_stay_distinct(tmp_path: Path) -> None:
    a, b = json.dumps({"prompt": "a"}), json.dumps({"prompt": "b"})
    first = load_dataset(_write(tmp_path / "1.jsonl", [a, b, a]), skip_bad_lines=False)
    second = load_dataset(_write(tmp_path / "2.jsonl", [b, a, a]), skip_bad_lines=False)
    assert {i.id for i in first.items} == {i.id for i in second.items}
    assert len({i.id for i in first.items}) == 3


def test_missing_and_empty_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read"):
        load_dataset(tmp_path / "nope.jsonl", skip_bad_lines=False)
    with pytest.raises(DatasetError, match="no valid items"):
        load_dataset(_write(tmp_path / "e.jsonl", ["{}"]), skip_bad_lines=True)


def test_dataset_environment_prompts_with_the_line_prompt() -> None:
    env = DatasetEnvironment([Item("a", {"prompt": "do it"})], ["terminal"], system_prompt="sys")
    messages = env.prompt(next(env.items(seed=0)))
    assert [(m.role, m.content) for m in messages] == [("system", "sys"), ("user", "do it")]
    assert env.toolsets == ("terminal",)


def test_ids_that_collide_with_a_suffix_stay_distinct(tmp_path: Path) -> None:
    lines = [json.dumps({"prompt": str(n), "id": i}) for n, i in enumerate(["a", "a", "a-2"])]
    loaded = load_dataset(_write(tmp_path / "d.jsonl", lines), skip_bad_lines=False)
    assert [i.id for i in loaded.items] == ["a", "a-2", "a-2-2"]
    assert [i.data["prompt"] for i in loaded.items] == ["0", "1", "2"]
