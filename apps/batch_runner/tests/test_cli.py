from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hermes_batch_runner.cli import main

Factory = Callable[..., Any]


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def _all_ids(run: Path) -> list[str]:
    return sorted(
        i for name in ("trajectories", "failed", "filtered") for i in _ids(run / f"{name}.jsonl")
    )


def test_a_run_writes_every_output_file(
    tmp_path: Path, fake_components: Factory, fake_wiring: Factory
) -> None:
    components = fake_components(3, fail_items=["item2"])
    wiring = fake_wiring(components)
    out = tmp_path / "run"
    argv = ["--output", str(out), "--num-items", "3", "--group-size", "2", "--no-progress"]
    assert main(argv, wiring=wiring) == 0
    assert wiring.entered == wiring.exited == 1
    assert sorted(_ids(out / "trajectories.jsonl")) == [
        "fake/item0/0", "fake/item0/1", "fake/item1/0", "fake/item1/1",
    ]  # fmt: skip
    assert sorted(_ids(out / "failed.jsonl")) == ["fake/item2/0", "fake/item2/1"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["expected"] == 6
    assert summary["complete"] is True
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["group_size"] == 2
    assert "api_key" not in json.dumps(run)
    assert "<html" in (out / "report.html").read_text()


def test_resume_runs_only_the_missing_rollouts_and_repairs_a_torn_line(
    tmp_path: Path, fake_components: Factory, fake_wiring: Factory
) -> None:
    out = tmp_path / "run"
    argv = ["--output", str(out), "--num-items", "4", "--no-progress"]
    assert main(argv, wiring=fake_wiring(fake_components(4))) == 0
    trajectories = out / "trajectories.jsonl"
    lines = trajectories.read_bytes().splitlines(keepends=True)
    # simulate a crash: two records never written, the last one torn in half
    trajectories.write_bytes(lines[0] + lines[1][: len(lines[1]) // 2])
    kept_id = json.loads(lines[0])["id"]
    components = fake_components(4)
    assert main([*argv, "--resume"], wiring=fake_wiring(components)) == 0
    assert len(components.calls) == 3
    assert kept_id.split("/")[1] not in {c[0] for c in components.calls}
    assert _all_ids(out) == [f"fake/item{k}/0" for k in range(4)]
    for line in trajectories.read_text().splitlines():
        json.loads(line)
    # a second resume has nothing left to do: the components are not even built
    again = fake_wiring(fake_components(4))
    assert main(["--output", str(out), "--resume", "--no-progress"], wiring=again) == 0
    assert again.entered == 0
    assert json.loads((out / "summary.json").read_text())["complete"] is True


def test_resume_with_other_options_is_refused_naming_them(
    tmp_path: Path,
    fake_components: Factory,
    fake_wiring: Factory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "run"
    assert main(["--output", str(out), "--num-items", "2", "--no-progress"],
                wiring=fake_wiring(fake_components(2))) == 0  # fmt: skip
    code = main(
        ["--output", str(out), "--resume", "--num-items", "3", "--max-turns", "9"],
        wiring=fake_wiring(fake_components(3)),
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "max_turns" in err
    assert "num_items" in err


def test_an_existing_run_is_not_overwritten_without_resume(
    tmp_path: Path, fake_components: Factory, fake_wiring: Factory
) -> None:
    out = tmp_path / "run"
    argv = ["--output", str(out), "--num-items", "1", "--no-progress"]
    assert main(argv, wiring=fake_wiring(fake_components(1))) == 0
    assert main(argv, wiring=fake_wiring(fake_components(1))) == 1


def test_malformed_dataset_lines_fail_with_their_line_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "ok"}\n{"prompt": 3}\n')
    code = main(["--dataset", str(data), "--output", str(tmp_path / "run"), "--num-items", "1"])
    assert code == 2
    assert "line 2" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_an_unwritable_output_directory_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_components: Factory,
    fake_wiring: Factory,
) -> None:  # fmt: skip
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code = main(["--output", str(blocker / "run")], wiring=fake_wiring(fake_components(1)))
    assert code == 1
    assert "not writable" in capsys.readouterr().err


def test_bad_options_exit_non_zero_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--server-type", "vllm"]) == 2
    assert "--model-url" in capsys.readouterr().err
    assert main(["--concurrency", "0"]) == 2
    with pytest.raises(SystemExit) as info:
        main(["--extra-body", "[1]"])
    assert info.value.code == 2


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--concurrency", "0"], "error: invalid configuration: --concurrency must be > 0"),
        (
            ["--env-options", '{"families": ["a]}'],
            "error: argument --env-options: not valid JSON: Unterminated string starting at "
            "column 15; see --help",
        ),
        (["--max-turns", "x"], "error: argument --max-turns: invalid int value: 'x'"),
    ],
)
def test_an_option_error_is_one_line_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    try:
        code = main([*argv, "--output", str(tmp_path / "run")])
    except SystemExit as exc:  # argparse's own errors
        code = int(str(exc.code))
    assert code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(expected)
    assert not (tmp_path / "run").exists()


def test_default_output_goes_under_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_components: Factory,
    fake_wiring: Factory,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--no-progress"], wiring=fake_wiring(fake_components(2))) == 0
    (run,) = (tmp_path / "runs").iterdir()
    assert len(_ids(run / "trajectories.jsonl")) == 2
    again = fake_wiring(fake_components(2))
    assert main(["--resume", "--no-progress"], wiring=again) == 0
    assert again.entered == 0


def test_a_config_file_gives_options_and_the_command_line_wins(
    tmp_path: Path, fake_components: Factory, fake_wiring: Factory
) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("num-items: 3\ngroup_size: 2\nmax_turns: 7\n")
    out = tmp_path / "run"
    argv = ["--config", str(config), "--group-size", "1", "--output", str(out), "--no-progress"]
    assert main(argv, wiring=fake_wiring(fake_components(3))) == 0
    recorded = json.loads((out / "run.json").read_text())["config"]
    assert (recorded["num_items"], recorded["group_size"], recorded["max_turns"]) == (3, 1, 7)
    assert len(_ids(out / "trajectories.jsonl")) + len(_ids(out / "failed.jsonl")) == 3


def test_skipped_dataset_lines_are_reported_by_line_number(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_components: Factory,
    fake_wiring: Factory,
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "ok"}\n{"prompt": 3}\nnot json\n')
    argv = ["--dataset", str(data), "--skip-bad-lines", "--output", str(tmp_path / "run")]
    assert main([*argv, "--no-progress"], wiring=fake_wiring(fake_components(1))) == 0
    err = capsys.readouterr().err
    assert "skipping invalid dataset line 2: 'prompt' must be a non-empty string" in err
    assert "skipping invalid dataset line 3: not valid JSON" in err


def test_resume_retries_infrastructure_failures_and_keeps_their_history(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_components: Factory,
    fake_wiring: Factory,
) -> None:
    out = tmp_path / "run"
    argv = ["--output", str(out), "--num-items", "3", "--no-progress"]
    assert main(argv, wiring=fake_wiring(fake_components(3, fail_items=["item1"]))) == 0
    assert _ids(out / "failed.jsonl") == ["fake/item1/0"]
    # a killed run: one finished rollout was never written
    lines = (out / "trajectories.jsonl").read_text().splitlines(keepends=True)
    (out / "trajectories.jsonl").write_text("".join(lines[:1]))
    capsys.readouterr()
    healthy = fake_components(3)
    assert (
        main(["--output", str(out), "--resume", "--no-progress"], wiring=fake_wiring(healthy)) == 0
    )
    err = capsys.readouterr().err
    assert "retrying 1 rollouts that failed for infrastructure reasons" in err
    assert sorted(item for item, _ in healthy.calls) == ["item1", "item2"]
    assert sorted(_ids(out / "trajectories.jsonl")) == [f"fake/item{i}/0" for i in range(3)]
    assert _ids(out / "failed.jsonl") == []
    assert _ids(out / "failed_history.jsonl") == ["fake/item1/0"]


def test_retry_failed_reruns_the_failures_of_a_finished_run(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_components: Factory,
    fake_wiring: Factory,
) -> None:
    out = tmp_path / "run"
    argv = ["--output", str(out), "--num-items", "2", "--no-progress"]
    assert main(argv, wiring=fake_wiring(fake_components(2, fail_items=["item0"]))) == 0
    capsys.readouterr()
    untouched = fake_wiring(fake_components(2))
    assert main(["--output", str(out), "--resume", "--no-progress"], wiring=untouched) == 0
    assert untouched.entered == 0
    assert "1 of them failed for infrastructure reasons; --retry-failed" in capsys.readouterr().err
    healthy = fake_components(2)
    retry = ["--output", str(out), "--retry-failed", "--no-progress"]
    assert main(retry, wiring=fake_wiring(healthy)) == 0
    assert "retrying 1 rollouts" in capsys.readouterr().err
    assert healthy.calls == [("item0", 0)]
    assert _ids(out / "failed.jsonl") == []
    assert sorted(_ids(out / "trajectories.jsonl")) == ["fake/item0/0", "fake/item1/0"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["failed"] == 0
