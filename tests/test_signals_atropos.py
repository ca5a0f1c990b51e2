"""``atropos_env``'s signal policy as a user meets it: ``uv run apps/atropos_env process|serve``
(embedded model, bwrap sandboxes) in its own process group, signalled with
``kill -SIG -- -PGID`` (``uv`` forwards a duplicate of it, which must not count twice).

``process``: the group in flight finishes and is written, then the JSONL's report, a line on
how to go on, exit ``128 + signal``, no traceback. ``serve`` stopped together with ``run-api``:
a message, ``128 + signal``, no bwrap host left behind.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from hermes_atropos_env.trainer import register_trainer

from tests.processes import background_process, free_port, wait_http
from tests.user_command import UserCommand, traversable_tmp

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TINY = [
    "--env.environment", "endless_terminals",
    "--env.tool_pool_mode", "bwrap",
    "--env.group_size", "2",
    "--env.max_agent_turns", "2",
    "--env.max_tokens_per_turn", "24",
    "--env.max_token_length", "2048",
    "--env.use_wandb", "false",
    "--env.enabled_toolsets", "terminal",
]  # fmt: skip


@pytest.fixture
def sandbox_tmp() -> Iterator[Path]:
    yield from traversable_tmp()


def _check_clean_stop(command: UserCommand, signum: int) -> str:
    output = command.output
    assert "Traceback" not in output, output[-4000:]
    assert command.leftovers() == []
    assert "sandboxes and model released" in output, output[-4000:]
    assert command.process.returncode == 128 + signum, output[-4000:]
    assert f"stopped by {signal.Signals(signum).name}" in output
    return output


@pytest.mark.timeout(600)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_process_drains_its_group_and_writes_the_report(
    tmp_path: Path, sandbox_tmp: Path, signum: signal.Signals
) -> None:
    out = tmp_path / "groups.jsonl"
    args = ["process", *TINY, "--env.total_steps", "3", "--env.data_path_to_save_groups", str(out)]
    command = UserCommand("apps/atropos_env", args, cwd=tmp_path, tmp=sandbox_tmp)
    command.wait_for(
        lambda: "Processing group 1/3" in command.stderr, timeout=300, what="started a group"
    )
    command.signal_group(signum)
    command.wait(timeout=300)
    output = _check_clean_stop(command, signum)
    assert "stopping: finishing in-flight groups" in output
    assert "cancelling in-flight groups" not in output
    groups = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(groups) == 1  # the group in flight was finished and written
    assert out.with_suffix(".report.html").is_file()
    assert "interrupted after 1 of 3 groups" in output
    assert "--env.total_steps 2" in output


@pytest.mark.timeout(600)
def test_serve_stopped_together_with_run_api_says_so_and_releases_its_sandboxes(
    tmp_path: Path, sandbox_tmp: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    run_api = [str(Path(sys.executable).parent / "run-api"), "--host", "127.0.0.1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MODAL_", "WANDB_"))}
    with background_process(
        [*run_api, "--port", str(port)], cwd=tmp_path, env=env, log=tmp_path / "api.log"
    ) as api:
        wait_http(url + "/", 60)

        async def register() -> None:
            async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:
                await register_trainer(client, batch_size=2, max_token_len=2048, num_steps=10)
                (await client.get("/batch")).raise_for_status()  # the trainer has started

        anyio.run(register)
        args = [
            "serve", *TINY,
            "--env.rollout_server_url", url,
            "--env.ensure_scores_are_not_same", "false",
            "--env.max_num_workers", "2",
        ]  # fmt: skip
        command = UserCommand("apps/atropos_env", args, cwd=tmp_path, tmp=sandbox_tmp)
        command.wait_for(
            lambda: "group of 2" in command.stderr, timeout=300, what="sent a first group"
        )
        command.signal_group(signal.SIGTERM)
        os.killpg(api.pid, signal.SIGTERM)
        command.wait(timeout=180)
    output = _check_clean_stop(command, signal.SIGTERM)
    assert "stopping: finishing in-flight groups" in output
    assert "cancelling in-flight groups" not in output
    assert "start serve again" in output
