"""The trainer on rollouts other processes produced, end to end on real components.

- A batch runner run (embedded SmolLM2, bwrap, `write_word` with its demonstration, four
  sequences in flight) -> `apps/trainer --trajectories RUN`: the records are sampler-exact
  (small |log ratio| at the first update) and the adapter it writes moves the model.
- The Atropos loop across three processes: `run-api`, `apps/atropos_env serve
  --env.lora_adapter FILE` and the trainer pulling `/batch`; the environment reloads the
  adapter the trainer rewrites, and later groups say they were sampled by it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import httpx
import numpy as np
import pytest
from hermes_envs.prefill import demonstration_path
from hermes_loop.embedded.token_backend import EmbeddedTokenBackend

pytest.importorskip("hermes_trainer")  # its own dependencies: see docs/testing.md

from hermes_trainer.config import MEASURED_RECIPE, TrainConfig, recipe_options
from hermes_trainer.loop import open_trainer, train
from hermes_trainer.lora import LoraSpec
from hermes_trainer.trajectories import read_groups

from tests.processes import background_process, clean_env, free_port, wait_http

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.heavy]

SYSTEM_PROMPT = TrainConfig(output=Path(".")).system_prompt
WRITE_WORD = json.dumps({"families": ["write_word"], "difficulties": [1]})


def _batch_run(output: Path) -> None:
    """Seed 0 gives one group of four with both solved and failed rollouts (measured)."""
    cmd = [
        sys.executable, str(ROOT / "apps" / "batch_runner"),
        "--env-options", WRITE_WORD,
        "--num-items", "4", "--group-size", "4", "--seed", "0",
        *recipe_options().split(),
        "--system-prompt", SYSTEM_PROMPT,
        "--prefill-messages", str(demonstration_path("write_word")),
        "--output", str(output), "--no-progress",
    ]  # fmt: skip

    async def run() -> None:
        with anyio.fail_after(600):
            done = await anyio.run_process(cmd, check=False)
        assert done.returncode == 0, done.stderr.decode()[-3000:]

    anyio.run(run)


@pytest.mark.timeout(1200)
def test_the_trainer_learns_from_a_batch_runner_run(tmp_path: Path) -> None:
    run = tmp_path / "batch"
    _batch_run(run)
    groups = read_groups([run], "SmolLM2-135M-Instruct.Q8_0.gguf")
    rewards = [{s.reward for s in group} for group in groups]
    assert any(len(r) > 1 for r in rewards), f"no mixed group any more: {rewards}; pick a seed"
    config = TrainConfig(
        output=tmp_path / "train",
        trajectories=(run,),
        steps=10,
        groups_per_step=4,
        lora=LoraSpec(rank=4, alpha=8.0),
    )
    history = anyio.run(lambda: train(config))
    assert len(history) == 1  # four groups, four per step: the source ends after one
    (step,) = history
    assert step.trained_groups >= 1
    assert step.rollouts == 16
    assert step.log_ratio_mean is not None
    assert step.log_ratio_max is not None
    # batched sampling (four sequences) recorded the sampler's own logprobs: only llama.cpp's
    # quantized arithmetic separates them from the learner's (a shifted mask shows as nats)
    assert step.log_ratio_mean < 0.1
    assert step.log_ratio_max < 2.0

    mixed = [group for group in groups if len({s.reward for s in group}) > 1]

    async def moved() -> float:
        """sum over trained tokens of advantage x (logprob with the adapter - without)"""
        samples = [(sample, group) for group in mixed for sample in group]
        # from the first trained id on (the prompt's logits are not needed); a group's shared
        # prompt is evaluated once per weights (fresh=False)
        starts = [s.mask.index(1) if 1 in s.mask else len(s.mask) - 1 for s, _ in samples]
        async with await EmbeddedTokenBackend.open(n_ctx=2048, n_threads=1) as backend:

            async def scores() -> list[np.ndarray]:
                return [
                    np.array(await backend.score(s.ids, start=start, fresh=False))
                    for (s, _), start in zip(samples, starts, strict=True)
                ]

            before = await scores()
            await backend.load_lora(config.adapter_path)
            after = await scores()
        total = 0.0
        for (sample, group), start, old, new in zip(samples, starts, before, after, strict=True):
            mean = sum(s.reward or 0.0 for s in group) / len(group)
            on = np.array(sample.mask[start:]) > 0
            total += ((sample.reward or 0.0) - mean) * float((new - old)[on].sum())
        return total

    assert anyio.run(moved) > 0  # solved rollouts got likelier under the adapter, failed less


@pytest.mark.anyio
@pytest.mark.timeout(1500)
async def test_the_atropos_loop_closes_through_run_api(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = clean_env(tmp_path)
    adapter = tmp_path / "adapter.gguf"
    run_api = [str(Path(sys.executable).parent / "run-api"), "--host", "127.0.0.1"]
    serve = [
        sys.executable, str(ROOT / "apps" / "atropos_env"), "serve",
        "--env.rollout_server_url", url,
        "--env.environment_options", WRITE_WORD,
        "--env.prefill_messages", str(demonstration_path("write_word")),
        "--env.system_prompt", SYSTEM_PROMPT,
        "--env.group_size", "4",
        "--env.max_agent_turns", f"{MEASURED_RECIPE['max_turns']:g}",
        "--env.max_tokens_per_turn", f"{MEASURED_RECIPE['max_tokens']:g}",
        "--env.max_token_length", f"{MEASURED_RECIPE['context_tokens']:g}",
        "--env.agent_temperature", f"{MEASURED_RECIPE['temperature']:g}",
        "--env.enabled_toolsets", "terminal",
        "--env.ensure_scores_are_not_same", "true",
        "--env.max_batches_offpolicy", "1",
        "--env.use_wandb", "false",
        "--env.lora_adapter", str(adapter),
    ]  # fmt: skip
    config = TrainConfig(
        output=tmp_path / "train",
        atropos_url=url,
        adapter=adapter,
        steps=4,
        groups_per_step=1,
        group_size=4,
        atropos_timeout_s=600,
        context_tokens=int(MEASURED_RECIPE["context_tokens"]),
        lora=LoraSpec(rank=4, alpha=8.0),
    )
    log = tmp_path / "serve.log"
    with background_process(
        [*run_api, "--port", str(port)], cwd=tmp_path, env=env, log=tmp_path / "api.log"
    ):
        await anyio.to_thread.run_sync(wait_http, url + "/", 60)
        async with open_trainer(config) as trainer:  # registers before the environment starts
            with background_process(serve, cwd=tmp_path, env=env, log=log):
                steps = []
                for step in range(1, config.steps + 1):
                    try:
                        metrics = await trainer.step(step)
                    except Exception:
                        print(log.read_text()[-5000:])
                        raise
                    assert metrics is not None
                    steps.append(metrics)
        async with httpx.AsyncClient(base_url=url) as client:
            status = (await client.get("/status")).json()
    text = log.read_text()
    first = steps[0]
    # every group was mixed (equal-score groups are not sent), so every step trained
    assert all(m.trained_groups == 1 and m.dropped_groups == 0 for m in steps), steps
    assert first.policy_lag == 0.0  # sampled by the base weights before any update
    assert first.log_ratio_mean is not None
    assert first.log_ratio_mean < 0.1
    assert "loaded LoRA adapter" in text, text[-3000:]
    # a later group was sampled by an adapter the trainer published (base weights would put
    # the lag at step - 1)
    assert any(m.policy_lag is not None and m.policy_lag < m.step - 1 for m in steps[2:]), steps
    assert status["current_step"] == config.steps
