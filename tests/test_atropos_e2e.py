"""End to end: `run-api` + `atropos_env serve` (embedded SmolLM2, endless_terminals on bwrap) + a
trainer pulling `/batch`; `process` writing JSONL + HTML; the swe_smith_oracle offline command;
the Modal variant failing fast without credentials.

Everything runs on 127.0.0.1 with tiny budgets (2 cores, SmolLM2-135M on CPU).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hermes_atropos_env.trainer import batch_problems
from hermes_protocols.formats import ATROPOS_MASKED as MASKED
from hermes_rollouts import pull_batch, register_trainer

from tests.processes import background_process, clean_env, free_port, wait_http
from tests.recompute import recompute

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "apps" / "atropos_env"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: the smallest budgets that still give a real multi-turn rollout
TINY = [
    "--env.max_agent_turns", "2",
    "--env.max_tokens_per_turn", "24",
    "--env.max_token_length", "2048",
    "--env.use_wandb", "false",
    "--env.agent_temperature", "1.0",
    "--env.enabled_toolsets", "terminal",
]  # fmt: skip


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _app_cmd(*args: str) -> list[str]:
    return [sys.executable, str(APP), *args]


async def _check_against_model(groups: Sequence[dict[str, Any]]) -> None:
    """Every unmasked token and its logprob is what the embedded model produced: a
    teacher-forced recompute of the whole sequence by the same model, in a fresh process,
    gives the same logprobs (to 1e-5) at every trainable position."""
    rows = [
        (ids, mask, lps)
        for group in groups
        for ids, mask, lps in zip(
            group["tokens"], group["masks"], group["inference_logprobs"], strict=True
        )
    ]
    # from the first sampled id on (the prompt's logits are not needed)
    starts = [next((p for p, m in enumerate(r[1]) if m != MASKED), len(r[1])) for r in rows]
    recomputed_rows = await recompute([(r[0], s) for r, s in zip(rows, starts, strict=True)])
    checked = 0
    for (ids, mask, lps), start, recomputed in zip(rows, starts, recomputed_rows, strict=True):
        for position, m in enumerate(mask):
            if m == MASKED:
                continue
            assert m == ids[position]
            assert position >= 1
            want = recomputed[position - start]
            assert abs(lps[position] - want) < 1e-5, (position, lps[position], want)
            checked += 1
    assert checked > 0


def _read_groups(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.anyio
@pytest.mark.timeout(900)
async def test_serve_streams_exact_tokens_to_a_trainer(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = clean_env(tmp_path)
    run_api = [str(Path(sys.executable).parent / "run-api"), "--host", "127.0.0.1"]
    serve = _app_cmd(
        "serve",
        "--env.environment", "endless_terminals",
        "--env.tool_pool_mode", "bwrap",
        "--env.group_size", "2",
        "--env.rollout_server_url", url,
        "--env.ensure_scores_are_not_same", "false",
        "--env.max_num_workers", "1",
        *TINY,
    )  # fmt: skip
    with background_process(
        [*run_api, "--port", str(port)], cwd=tmp_path, env=env, log=tmp_path / "api.log"
    ):
        wait_http(url + "/", 60)
        async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:
            await register_trainer(client, batch_size=2, max_token_len=2048, num_steps=1)
            with background_process(
                serve, cwd=tmp_path, env=env, log=tmp_path / "serve.log"
            ) as proc:
                try:
                    batch = await pull_batch(client, timeout=600)
                except Exception:
                    print((tmp_path / "serve.log").read_text()[-5000:])
                    raise
                assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
                # SIGTERM cancels the run inside the event loop: pool and model are released
                os.killpg(proc.pid, signal.SIGTERM)
                await anyio.to_thread.run_sync(lambda: proc.wait(timeout=120))
                log = (tmp_path / "serve.log").read_text()
                assert proc.returncode == 128 + signal.SIGTERM, log[-3000:]
                assert "sandboxes and model released" in log
    assert batch_problems(batch) == []
    assert sum(len(g["tokens"]) for g in batch) == 2
    for group in batch:
        assert group["group_overrides"]["token_source"] == "sampler"
        assert group["messages"] is None or all(group["messages"])
    await _check_against_model(batch)


@pytest.mark.anyio
@pytest.mark.timeout(900)
async def test_serve_with_its_defaults_feeds_a_trainer_within_five_minutes(tmp_path: Path) -> None:
    """The documented first serve: no budget flags at all (embedded defaults: group_size 4,
    the terminal demonstration, equal-score groups sent) and a trainer asking for batches of 4.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = clean_env(tmp_path)
    run_api = [str(Path(sys.executable).parent / "run-api"), "--host", "127.0.0.1"]
    serve = _app_cmd("serve", "--env.rollout_server_url", url)
    with background_process(
        [*run_api, "--port", str(port)], cwd=tmp_path, env=env, log=tmp_path / "api.log"
    ):
        wait_http(url + "/", 60)
        async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:
            await register_trainer(client, batch_size=4, max_token_len=2048, num_steps=1)
            with background_process(serve, cwd=tmp_path, env=env, log=tmp_path / "serve.log"):
                started = time.monotonic()
                try:
                    batch = await pull_batch(client, timeout=300)
                except Exception:
                    print((tmp_path / "serve.log").read_text()[-5000:])
                    raise
                elapsed = time.monotonic() - started
    print(f"first batch of 4 after {elapsed:.0f}s")
    assert batch_problems(batch) == []
    assert sum(len(g["tokens"]) for g in batch) == 4
    log = (tmp_path / "serve.log").read_text()
    assert "train/groups_sent" in log or "group of 4" in log


@pytest.mark.anyio
@pytest.mark.timeout(900)
async def test_process_writes_jsonl_with_exact_tokens_and_html(tmp_path: Path) -> None:
    out = tmp_path / "groups.jsonl"
    cmd = _app_cmd(
        "process",
        "--env.environment", "endless_terminals",
        "--env.tool_pool_mode", "bwrap",
        "--env.total_steps", "2",
        "--env.group_size", "2",
        "--env.data_path_to_save_groups", str(out),
        *TINY,
    )  # fmt: skip
    with anyio.fail_after(800):
        done = await anyio.run_process(cmd, cwd=tmp_path, env=clean_env(tmp_path), check=False)
    assert done.returncode == 0, done.stderr.decode()[-5000:]
    groups = _read_groups(out)
    assert len(groups) == 2
    assert batch_problems(groups) == []
    for group in groups:
        assert len(group["tokens"]) == 2
        assert group["group_overrides"]["token_source"] == "sampler"
        assert all(m[0]["role"] == "system" for m in group["messages"])
    assert out.with_suffix(".html").is_file()
    assert out.with_suffix(".report.html").is_file()
    await _check_against_model(groups)


@pytest.mark.timeout(900)
def test_swe_smith_oracle_documented_command_runs_offline_on_bwrap(tmp_path: Path) -> None:
    cmd = _app_cmd(
        "process",
        "--env.environment", "swe_smith_oracle",
        "--env.use_wandb", "false",
        "--env.total_steps", "2",
        "--env.group_size", "1",
        "--env.max_items", "2",
        "--env.tool_pool_mode", "bwrap",
        # keep the rollout short on this machine; the documented flags above are unchanged
        "--env.max_agent_turns", "1",
        "--env.max_tokens_per_turn", "16",
    )  # fmt: skip
    done = subprocess.run(
        cmd, cwd=tmp_path, env=clean_env(tmp_path), capture_output=True, timeout=800
    )
    assert done.returncode == 0, done.stderr.decode()[-5000:]
    groups = _read_groups(tmp_path / "runs" / "atropos" / "hermes_swe_smith_oracle.jsonl")
    assert len(groups) == 2
    assert batch_problems(groups) == []
    assert (tmp_path / "runs" / "atropos" / "hermes_swe_smith_oracle.html").is_file()


def test_modal_without_credentials_stops_within_seconds(tmp_path: Path) -> None:
    cmd = _app_cmd(
        "process",
        "--env.environment", "swe_smith_oracle",
        "--env.use_wandb", "false",
        "--env.total_steps", "2",
        "--env.group_size", "1",
        "--env.max_items", "2",
        "--env.tool_pool_mode", "modal",
        "--env.modal_image", "python:3.11",
        "--env.modal_slots_per_sandbox", "10",
        "--env.modal_min_sandboxes", "1",
    )  # fmt: skip
    start = time.monotonic()
    done = subprocess.run(
        cmd, cwd=tmp_path, env=clean_env(tmp_path), capture_output=True, timeout=60
    )
    elapsed = time.monotonic() - start
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr[-3000:]
    assert "MODAL_TOKEN_ID" in stderr
    assert "MODAL_TOKEN_SECRET" in stderr
    assert elapsed < 30, f"took {elapsed:.1f}s"
    assert not (tmp_path / "runs").exists()
