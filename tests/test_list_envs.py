"""``--list-envs`` of the apps that take ``--env``: the environments hermes_rollouts lists, and
exit 0 before any other option is checked (like ``--help``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

import pytest
from hermes_rollouts import environments_text

#: each app's ``main`` with an option its own checks refuse
APPS = [
    pytest.param("hermes_batch_runner.cli", ["--concurrency", "0"], id="batch_runner"),
    pytest.param("hermes_trainer.cli", ["--steps", "0"], id="trainer"),
]


@pytest.mark.parametrize(("module", "refused"), APPS)
def test_list_envs_prints_the_environments_and_exits_zero(
    module: str, refused: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    if module.startswith("hermes_trainer"):
        pytest.importorskip("hermes_trainer")  # its own dependencies: see docs/testing.md
    main: Callable[[Sequence[str]], int] = importlib.import_module(module).main
    with pytest.raises(SystemExit) as info:
        main(["--list-envs", *refused])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out == environments_text() + "\n"
    assert "endless_terminals " in out
