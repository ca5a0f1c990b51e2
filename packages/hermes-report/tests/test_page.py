from __future__ import annotations

import json
import re
import stat
from pathlib import Path

from hermes_report import TokenTexts, render_report, write_report
from hermes_report.cli import main
from tokenizers import AddedToken, Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace


def _rows(page: str) -> list[dict[str, object]]:
    blob = re.search(r'<script type="application/json" id="rows">(.*?)</script>', page)
    assert blob is not None
    rows: list[dict[str, object]] = json.loads(blob.group(1))
    return rows


def _records() -> list[dict[str, object]]:
    return [
        {"id": "a", "reward": 1.0, "stop_reason": "final_answer", "tokens": [0, 1, 2],
         "masks": [0, 1, 1], "logprobs": [0.0, -0.1, -0.2], "token_source": "sampler",
         "finished_at": 100.0},
        {"id": "b", "reward": 0.0, "stop_reason": "max_turns", "filter_reason": "min_reward",
         "finished_at": 102.0},
        {"id": "c", "failure": {"kind": "infrastructure", "phase": "acquire"}},
    ]  # fmt: skip


def test_counts_rows_and_lazy_details() -> None:
    page = render_report(_records(), title="run")
    assert re.search(r'data-count="total">3<', page)
    assert re.search(r'data-count="kept">1<', page)
    assert re.search(r'data-count="failed">1<', page)
    assert re.search(r'data-count="filtered">1<', page)
    assert re.search(r'data-count="pass">50% \(1/2\)<', page)
    assert [r["st"] for r in _rows(page)] == ["kept", "filtered", "failed"]
    assert [r["why"] for r in _rows(page)] == [None, "min_reward", "infrastructure:acquire"]
    assert page.count('<script type="application/json" id="d') == 3
    assert 'data-chart="throughput"><figcaption>Throughput' in page
    assert "<polyline" in page  # two timestamped rollouts draw a line
    assert 'id="drift-meaning"' in page  # what drift means, said where it is shown
    assert "http://" not in page.split("<style>")[1]
    assert "https://" not in page


def test_vocab_holds_only_the_ids_shown() -> None:
    asked: list[list[int]] = []

    def texts(ids: list[int]) -> list[str]:
        asked.append(list(ids))
        return [f"<{i}>" for i in ids]

    page = render_report(_records(), token_text=texts)
    assert asked == [[0, 1, 2]]
    assert '"0":"\\u003c0\\u003e"' in page


def _tokenizer(path: Path) -> Path:
    tok = Tokenizer(WordLevel({"hello": 0, "world": 1, "[UNK]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.add_special_tokens([AddedToken("<end>", special=True)])
    tok.save(str(path))
    return path


def test_token_texts_from_a_tokenizer_file(tmp_path: Path) -> None:
    texts = TokenTexts.from_file(_tokenizer(tmp_path / "tokenizer.json"))
    assert texts([0, 1, 3]) == ["hello", "world", "<end>"]
    assert texts.special_ids == frozenset({3})


def test_cli_renders_a_run_directory_with_its_tokenizer(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _tokenizer(run / "tokenizer.json")
    (run / "trajectories.jsonl").write_text(json.dumps(_records()[0]) + "\n")
    assert main([str(run)]) == 0
    page = (run / "report.html").read_text()
    assert '"vocab">{"0":"hello","1":"world","2":"[UNK]"}' in page
    assert stat.S_IMODE((run / "report.html").stat().st_mode) == 0o644
    assert main([str(tmp_path / "nothing")]) == 2


def test_write_report_replaces_the_file(tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    target.write_text("old")
    write_report(_records(), target)
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]
