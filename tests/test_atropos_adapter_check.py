"""Issue 26, finding 4: an Atropos environment serving ``--env.lora_adapter`` with another file
than the trainer's ``--adapter`` (or none) sampled with weights the trainer never wrote, and the
run "succeeded". The trainer's Atropos feed, on a real ``run-api``, now tolerates such groups for
a few updates (old groups in flight) and then stops with one line naming both options.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from hermes_protocols import ConfigError
from hermes_rollouts import file_sha256

pytest.importorskip("hermes_trainer")  # its own dependencies: see docs/testing.md
from hermes_trainer.atropos_feed import BASE_WEIGHTS_LAG, AtroposFeed, open_atropos_feed

from tests.processes import background_process, clean_env, free_port, wait_http

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _group(sha: str | None) -> dict[str, Any]:
    """A sampler-exact group of two sequences, sampled with adapter ``sha`` (None: base)."""
    return {
        "tokens": [[1, 2, 3, 4], [1, 2, 7]],
        "masks": [[-100, -100, 3, 4], [-100, -100, 7]],
        "inference_logprobs": [[1.0, 1.0, -0.25, -0.5], [1.0, 1.0, -2.0]],
        "scores": [1.0, 0.0],
        "generation_params": {"sampling": {"temperature": 1.0}},
        "group_overrides": {
            "token_source": "sampler",
            "logprob_modes": ["sampled"],
            "lora_adapter_sha256": sha,
        },
    }


async def _collect(feed: AtroposFeed, url: str, step: int, sha: str | None) -> float | None:
    """Send one group as the environment would, pull it as step ``step``; its policy lag."""
    async with httpx.AsyncClient(base_url=url) as env:
        (await env.post("/scored_data", json=_group(sha))).raise_for_status()
    return (await feed.collect(step)).policy_lag


@pytest.fixture
def run_api(tmp_path: Path) -> Any:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [str(Path(sys.executable).parent / "run-api"), "--host", "127.0.0.1"]
    with background_process(
        [*command, "--port", str(port)],
        cwd=tmp_path,
        env=clean_env(tmp_path),
        log=tmp_path / "api.log",
    ):
        wait_http(url + "/", 60)
        yield url


@pytest.mark.parametrize("env_adapter", ["another file", "none"])
async def test_an_environment_not_loading_the_trainers_adapter_stops_the_run(
    run_api: str, tmp_path: Path, env_adapter: str
) -> None:
    ours = tmp_path / "adapter.gguf"
    ours.write_bytes(b"the trainer's adapter after step 1")
    other = tmp_path / "old.gguf"
    other.write_bytes(b"an adapter of another run")
    foreign = file_sha256(other) if env_adapter == "another file" else None
    async with open_atropos_feed(
        run_api, batch_size=2, max_token_len=64, steps=20, timeout_s=30
    ) as feed:
        assert await _collect(feed, run_api, 1, None) == 0.0  # base weights before any update
        await feed.publish(ours, 1)
        assert await _collect(feed, run_api, 2, file_sha256(ours)) == 0.0
        last_tolerated = 1 + BASE_WEIGHTS_LAG  # step - 1 - first adapter < the lag bound
        for step in range(3, last_tolerated + 1):  # groups still in flight: no verdict yet
            lag = await _collect(feed, run_api, step, foreign)
            assert lag == (step - 1 if foreign is None else None)
        with pytest.raises(ConfigError) as failure:
            await _collect(feed, run_api, last_tolerated + 1, foreign)
    line = str(failure.value)
    assert "\n" not in line
    assert f"--env.lora_adapter {ours}" in line
    assert "--adapter" in line
    assert ("base weights" if foreign is None else foreign[:12]) in line


async def test_an_environment_loading_the_trainers_adapter_runs_on(
    run_api: str, tmp_path: Path
) -> None:
    adapter = tmp_path / "adapter.gguf"
    async with open_atropos_feed(
        run_api, batch_size=2, max_token_len=64, steps=20, timeout_s=30
    ) as feed:
        for step in range(1, BASE_WEIGHTS_LAG + 4):
            adapter.write_bytes(f"the adapter after step {step}".encode())
            sha = file_sha256(adapter)
            await feed.publish(adapter, step)
            assert await _collect(feed, run_api, step + 1, sha) == 0.0
