"""HermesAtroposEnv on atroposlib's real run loops, fed by a scripted rollout source."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from hermes_atropos_env import HermesAtroposEnvConfig, InferenceConfig
from hermes_atropos_env.env import HermesAtroposEnv
from hermes_atropos_env.retokenize import ChatTemplateRetokenizer
from hermes_atropos_env.trainer import batch_problems
from hermes_protocols import FailureKind, TokenTrace, ToolErrorKind
from hermes_protocols.formats import ATROPOS_MASKED as MASKED
from hermes_report import group_records

pytestmark = pytest.mark.anyio


def _config(tmp_path: Path, tokenizer_dir: Path, **overrides: object) -> HermesAtroposEnvConfig:
    values: dict[str, object] = {
        "tokenizer_name": str(tokenizer_dir),
        "use_wandb": False,
        "group_size": 2,
        "total_steps": 2,
        "include_messages": True,
        "ensure_scores_are_not_same": False,
        "data_path_to_save_groups": str(tmp_path / "groups.jsonl"),
        "data_dir_to_save_evals": str(tmp_path / "evals"),
        "wandb_name": "hermes_test",
    }
    values.update(overrides)
    return HermesAtroposEnvConfig(**values)


def _trace(seed: int) -> TokenTrace:
    prompt = TokenTrace().append_context([10 + seed, 11, 12])
    turn = prompt.append_generated([20 + seed, 21], [-0.5, -1.5]).append_context([30, 31])
    return turn.append_generated([40 + seed, 2], [-0.25, -0.01])


def _process_env(config: HermesAtroposEnvConfig, source) -> HermesAtroposEnv:
    env = HermesAtroposEnv.create(config, InferenceConfig(), source.factory)
    env.process_mode = True
    env.n_groups_to_process = config.total_steps
    env.group_size_to_process = config.group_size
    return env


async def test_process_writes_aligned_jsonl_and_html(
    tmp_path, tokenizer_dir, make_rollout, scripted_source
) -> None:
    def produce(item, size):
        return [
            make_rollout(_trace(i), reward=float(i), item=item, tool_errors=[ToolErrorKind.TIMEOUT])
            for i in range(size)
        ]

    source = scripted_source(produce)
    config = _config(tmp_path, tokenizer_dir)
    env = _process_env(config, source)
    await env.process_manager()
    lines = (tmp_path / "groups.jsonl").read_text().splitlines()
    groups = [json.loads(line) for line in lines]
    assert len(groups) == 2
    assert source.groups_run == [("train-0-0", 2), ("train-0-1", 2)]
    assert (source.opened, source.closed) == (1, 1)
    assert batch_problems(groups) == []
    for group in groups:
        assert group["tokens"] == [list(_trace(0).ids), list(_trace(1).ids)]
        assert group["inference_logprobs"][0] == [1.0] * 3 + [-0.5, -1.5] + [1.0] * 2 + [
            -0.25,
            -0.01,
        ]
        assert group["masks"][0][:3] == [MASKED] * 3
        assert group["messages"][0][2]["tool_calls"][0]["function"]["name"] == "terminal"
    assert (tmp_path / "groups.html").is_file()
    logged = env.metrics_history
    assert [m["train/groups_sent"] for m in logged] == [1, 1]
    assert [m["train/tool_errors/timeout"] for m in logged] == [2, 2]
    assert [m["train/pass_rate"] for m in logged] == [0.5, 0.5]


async def test_infrastructure_failures_are_not_sent_and_next_item_is_used(
    tmp_path, tokenizer_dir, make_rollout, scripted_source
) -> None:
    calls = []

    def produce(item, size):
        calls.append(item.id)
        if len(calls) == 1:
            return [
                make_rollout(_trace(0), item=item),
                make_rollout(failure=FailureKind.INFRASTRUCTURE),
            ]
        return [make_rollout(_trace(i), item=item, reward=0.0) for i in range(size)]

    source = scripted_source(produce)
    env = _process_env(_config(tmp_path, tokenizer_dir, total_steps=1), source)
    await env.process_manager()
    groups = [json.loads(x) for x in (tmp_path / "groups.jsonl").read_text().splitlines()]
    assert [g["group_overrides"]["item_id"] for g in groups] == ["train-0-1"]
    (metrics,) = env.metrics_history
    assert metrics["train/excluded/infrastructure_failure"] == 1
    assert metrics["train/groups_dropped_incomplete"] == 1


async def test_max_items_ends_processing(
    tmp_path, tokenizer_dir, make_rollout, scripted_source
) -> None:
    source = scripted_source(lambda item, size: [make_rollout(item=item) for _ in range(size)])
    env = _process_env(
        _config(tmp_path, tokenizer_dir, total_steps=5, max_items=2, group_size=1), source
    )
    await env.process_manager()
    assert len(source.groups_run) == 2
    assert len((tmp_path / "groups.jsonl").read_text().splitlines()) == 2


async def test_phase1_process_uses_the_chat_template(
    tmp_path, tokenizer_dir, make_rollout, scripted_source
) -> None:
    from hermes_loop import HFTokenizer

    tokenizer = HFTokenizer.from_directory(tokenizer_dir)
    retokenize = ChatTemplateRetokenizer(tokenizer, tokenizer.chat_template)
    source = scripted_source(
        lambda item, size: [make_rollout(None, item=item) for _ in range(size)], retokenize
    )
    config = _config(tmp_path, tokenizer_dir, total_steps=1)
    inference = InferenceConfig(
        server_type="openai", base_url="http://127.0.0.1:9/v1", tokenizer_name=str(tokenizer_dir)
    )
    env = HermesAtroposEnv.create(config, inference, source.factory)
    env.process_mode, env.n_groups_to_process, env.group_size_to_process = True, 1, 2
    await env.process_manager()
    (group,) = [json.loads(x) for x in (tmp_path / "groups.jsonl").read_text().splitlines()]
    assert group["group_overrides"]["token_source"] == "retokenized"
    assert group["inference_logprobs"] is None
    text = env.tokenizer.decode(
        [t for t, m in zip(group["tokens"][0], group["masks"][0], strict=False) if m != MASKED]
    )
    assert "Done: a.txt, b.txt" in text
    assert "List the files" not in text


async def test_evaluate_writes_metrics_and_samples(
    tmp_path, tokenizer_dir, make_rollout, scripted_source
) -> None:
    source = scripted_source(lambda item, size: [make_rollout(item=item, reward=1.0)])
    config = _config(tmp_path, tokenizer_dir, max_items=3)
    env = HermesAtroposEnv.create(config, InferenceConfig(), source.factory)
    await env._run_evaluate()
    metrics = json.loads((tmp_path / "evals" / "metrics.json").read_text())
    assert metrics["results"]["all"]["eval/pass_rate"] == 1.0
    samples = (tmp_path / "evals" / "samples.jsonl").read_text().splitlines()
    assert [json.loads(s)["item_id"] for s in samples] == ["eval-0-0", "eval-0-1", "eval-0-2"]


@pytest.mark.parametrize("ensure_different", [True, False])
async def test_equal_score_groups_are_counted_and_dropped_only_when_asked(
    tmp_path, tokenizer_dir, make_rollout, scripted_source, ensure_different, caplog
) -> None:
    source = scripted_source(
        lambda item, size: [make_rollout(_trace(i), item=item, reward=0.0) for i in range(size)]
    )
    config = _config(
        tmp_path, tokenizer_dir, total_steps=1, ensure_scores_are_not_same=ensure_different
    )
    env = HermesAtroposEnv.create(config, InferenceConfig(), source.factory)
    async with source.factory(config, env.inference) as opened:
        env._source = opened
        await env.setup()
        item = await env.get_next_item()
        group, _ = await env.collect_trajectories(item)
    metrics = env.train_metrics.snapshot()
    if ensure_different:
        assert group is None
        assert metrics["train/groups_dropped_equal_scores"] == 1
        assert metrics["train/groups_sent"] == 0
        assert "all 2 scores are 0.0; group dropped" in caplog.text
    else:
        assert group is not None
        assert group["scores"] == [0.0, 0.0]
        assert metrics["train/groups_sent_equal_scores"] == 1
        assert metrics["train/groups_dropped_equal_scores"] == 0


async def test_a_group_says_how_many_demonstration_messages_its_prompts_hold(
    tmp_path, tokenizer_dir, make_rollout, scripted_source
) -> None:
    demonstrated = {"workspace": {"prefill_messages": 2}}
    source = scripted_source(
        lambda item, size: [
            attrs.evolve(make_rollout(_trace(i), item=item), metadata=demonstrated)
            for i in range(size)
        ]
    )
    config = _config(tmp_path, tokenizer_dir, total_steps=1)
    env = HermesAtroposEnv.create(config, InferenceConfig(), source.factory)
    async with source.factory(config, env.inference) as opened:
        env._source = opened
        await env.setup()
        group, _ = await env.collect_trajectories(await env.get_next_item())
    assert group is not None
    assert group["group_overrides"]["prefill_messages"] == 2
    # the report reads it, so a demonstration's calls are not counted as the model's
    assert {r["prefill_messages"] for r in group_records(group, 0)} == {2}
