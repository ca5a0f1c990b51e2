"""The objective's knobs on a tiny random Llama through the real learner, each checked against
a value computed independently (numpy, or today's formula written out): the loss
normalisations, the asymmetric clip, the learning-rate schedules, passes and minibatches, the
KL term to the base model; and the default configuration bit-identical to one Adam step of the
token-normalised clipped loss."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import optax  # type: ignore[import-untyped]
import pytest
from hermes_protocols import ConfigError
from hermes_trainer.config import TrainConfig, config_record, resume_differences
from hermes_trainer.gguf_weights import BaseWeights, LlamaConfig
from hermes_trainer.grpo import TrainGroup
from hermes_trainer.learner import LoraLearner
from hermes_trainer.llama import token_logprobs
from hermes_trainer.lora import LoraSpec
from hermes_trainer.objective import sequence_loss, token_weights
from hermes_trainer.optimizer import OptimizerSpec
from hermes_trainer.packing import TrainSequence, pack

pytestmark = pytest.mark.slow  # the trainer's dependencies (JAX); a few seconds in all

CONFIG = LlamaConfig(
    n_layers=2, d_model=16, d_ff=24, n_heads=4, n_kv_heads=2, vocab_size=40, rope_base=1e4,
    rms_eps=1e-5,
)  # fmt: skip
LORA = LoraSpec(rank=2, alpha=4.0)
PAD = 256  # the learner's PAD_TO
_LOGPROBS = jax.jit(functools.partial(token_logprobs, CONFIG, LORA.scale))


def _base(seed: int = 0) -> BaseWeights:
    rng = np.random.default_rng(seed)
    c, hd = CONFIG, CONFIG.head_dim

    def w(*shape: int) -> np.ndarray:
        return rng.normal(0, shape[-1] ** -0.5, (c.n_layers, *shape)).astype(np.float32)

    layers = {
        "attn_q": w(c.n_heads * hd, c.d_model),
        "attn_k": w(c.n_kv_heads * hd, c.d_model),
        "attn_v": w(c.n_kv_heads * hd, c.d_model),
        "attn_output": w(c.d_model, c.n_heads * hd),
        "ffn_gate": w(c.d_ff, c.d_model),
        "ffn_up": w(c.d_ff, c.d_model),
        "ffn_down": w(c.d_model, c.d_ff),
        "attn_norm": np.ones((c.n_layers, c.d_model), np.float32),
        "ffn_norm": np.ones((c.n_layers, c.d_model), np.float32),
    }
    return BaseWeights(
        config=c,
        embed=rng.normal(0, 1, (c.vocab_size, c.d_model)).astype(np.float32),
        out_norm=np.ones(c.d_model, np.float32),
        output=None,
        layers=layers,
    )


def _sequence(
    rng: np.random.Generator, prompt: list[int], n: int, advantage: float
) -> TrainSequence:
    ids = prompt + [int(x) for x in rng.integers(0, CONFIG.vocab_size, n)]
    mask = [0] * len(prompt) + [1] * n
    # the sampler's logprobs: near the trainer's but not equal (a ratio off 1)
    logprobs = [0.0] * len(prompt) + [float(x) for x in rng.uniform(-4.0, -3.0, n)]
    return TrainSequence(
        ids=tuple(ids), mask=tuple(mask), sampler_logprobs=tuple(logprobs), advantage=advantage
    )


def _groups(seed: int = 1) -> tuple[TrainGroup, ...]:
    """Two groups; the first's sequences of different lengths (3 and 9 trainable tokens)."""
    rng = np.random.default_rng(seed)
    prompt = [int(x) for x in rng.integers(0, CONFIG.vocab_size, 5)]
    first = (_sequence(rng, prompt, 3, 1.0), _sequence(rng, prompt, 9, -1.0))
    second = (_sequence(rng, prompt, 4, -0.5), _sequence(rng, prompt, 6, 0.5))
    return (
        TrainGroup(sequences=first, temperature=1.0),
        TrainGroup(sequences=second, temperature=0.7),
    )


def _learner(spec: OptimizerSpec, *, steps: int = 1, budget_tokens: int = 1) -> LoraLearner:
    learner = LoraLearner(_base(), LORA, spec, seed=3)
    # a non-zero B, so the adapter matters from the first step
    arrays = learner.lora_arrays()
    rng = np.random.default_rng(4)
    start = {k: (a, rng.normal(0, 0.1, b.shape).astype(np.float32)) for k, (a, b) in arrays.items()}
    return LoraLearner(
        _base(), LORA, spec, seed=3, start=start, steps=steps, budget_tokens=budget_tokens
    )


def _logprobs(learner: LoraLearner, sequence: TrainSequence, temperature: float) -> np.ndarray:
    """The trainer's logprobs of ``sequence``'s targets, one sequence alone (not packed)."""
    lora = {k: (jnp.asarray(a), jnp.asarray(b)) for k, (a, b) in learner.lora_arrays().items()}
    ids = np.asarray(sequence.ids, np.int32)
    n = len(ids) - 1
    return np.asarray(
        _LOGPROBS(
            dict(learner.params), lora, jnp.asarray(ids[:-1]), jnp.asarray(ids[1:]),
            jnp.arange(n), jnp.ones(n, jnp.int32), temperature=jnp.float32(temperature),
        )
    )  # fmt: skip


def _token_losses(
    learner: LoraLearner, group: TrainGroup, low: float = 0.2, high: float = 0.2
) -> list[np.ndarray]:
    """Each sequence's clipped token losses (trainable tokens only), in numpy."""
    out = []
    for s in group.sequences:
        p = _logprobs(learner, s, group.temperature).astype(np.float64)
        on = np.asarray(s.mask[1:]) > 0
        ratio = np.exp(p[on] - np.asarray(s.sampler_logprobs[1:])[on])
        a = s.advantage
        out.append(-np.minimum(ratio * a, np.clip(ratio, 1 - low, 1 + high) * a))
    return out


def test_the_default_update_is_todays_token_normalised_adam_step_bit_for_bit() -> None:
    groups = _groups()
    learner = _learner(OptimizerSpec())
    lora = {k: (jnp.asarray(a), jnp.asarray(b)) for k, (a, b) in learner.lora_arrays().items()}
    params = dict(learner.params)

    def today(lo: dict[str, tuple[jax.Array, jax.Array]], batch: dict[str, jax.Array]) -> jax.Array:
        p = token_logprobs(
            CONFIG, LORA.scale, params, lo, batch["ids"], batch["targets"], batch["positions"],
            batch["segments"], temperature=batch["temperature"],
        )  # fmt: skip
        ratio = jnp.exp(p - batch["sampler_logprobs"])
        a = batch["advantages"]
        per_token = -jnp.minimum(ratio * a, jnp.clip(ratio, 0.8, 1.2) * a)
        return jnp.sum(per_token * batch["mask"])

    grad = jax.jit(jax.value_and_grad(today))
    total = jax.tree.map(jnp.zeros_like, lora)
    loss_sum = 0.0
    for group in groups:
        batch = {k: jnp.asarray(v) for k, v in pack(group.sequences, pad_to=PAD).items()}
        batch["temperature"] = jnp.float32(group.temperature)
        loss, g = grad(lora, batch)
        total = jax.tree.map(jnp.add, total, g)
        loss_sum += float(loss)
    trainable = sum(s.trainable for g in groups for s in g.sequences)
    grads = jax.tree.map(lambda g: g / trainable, total)
    adam = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(5e-4))
    updates, _ = adam.update(grads, adam.init(lora), lora)
    expected = optax.apply_updates(lora, updates)

    stats = learner.update(groups)
    assert stats.loss == loss_sum / trainable
    assert stats.learning_rate == 5e-4
    for kind, (a, b) in learner.lora_arrays().items():
        np.testing.assert_array_equal(a, np.asarray(expected[kind][0]))
        np.testing.assert_array_equal(b, np.asarray(expected[kind][1]))
    assert np.abs(learner.lora_arrays()["attn_q"][1] - np.asarray(lora["attn_q"][1])).max() > 0


def test_sequence_norm_weighs_each_sequence_equally_and_constant_divides_by_the_budget() -> None:
    groups = _groups()
    row = pack(groups[0].sequences, pad_to=PAD)
    weights = token_weights(
        row["mask"].astype(np.float32), row["segments"].astype(np.int32), "sequence"
    )
    assert np.isclose(weights[row["segments"] == 1].sum(), 1.0)  # 3 tokens of 1/3
    assert np.isclose(weights[row["segments"] == 2].sum(), 1.0)  # 9 tokens of 1/9
    np.testing.assert_allclose(sorted(set(weights[weights > 0].round(6))), [1 / 9, 1 / 3], 1e-5)

    reference = _learner(OptimizerSpec())
    per_sequence = [loss for group in groups for loss in _token_losses(reference, group)]
    token = sum(x.sum() for x in per_sequence) / sum(x.size for x in per_sequence)
    sequence = np.mean([x.mean() for x in per_sequence])
    constant = sum(x.sum() for x in per_sequence) / (len(per_sequence) * 64 * 2)
    assert not np.isclose(token, sequence, rtol=1e-2)  # the lengths differ: so do the norms
    for norm, expected in (("token", token), ("sequence", sequence), ("constant", constant)):
        learner = _learner(OptimizerSpec(loss_norm=norm), budget_tokens=64 * 2)  # type: ignore[arg-type]
        stats = learner.update(groups)
        assert stats.loss == pytest.approx(expected, rel=1e-4, abs=1e-7), norm


def test_clip_eps_high_clips_the_ratio_at_one_plus_it() -> None:
    groups = _groups()
    learner = _learner(OptimizerSpec())
    group = groups[0]
    # the sampler 2x less likely than the trainer: ratio 2 on every token
    shifted = tuple(
        attrs.evolve(
            s,
            sampler_logprobs=tuple(
                float(p) - math.log(2.0) if m else 0.0
                for p, m in zip((0.0, *_logprobs(learner, s, 1.0)), s.mask, strict=True)
            ),
        )
        for s in group.sequences
    )
    row = pack(shifted, pad_to=PAD)
    batch = {k: jnp.asarray(v) for k, v in row.items()}
    batch["weights"] = batch["mask"]
    batch["temperature"] = jnp.float32(1.0)
    lora = {k: (jnp.asarray(a), jnp.asarray(b)) for k, (a, b) in learner.lora_arrays().items()}
    loss = functools.partial(sequence_loss, config=CONFIG, scale=LORA.scale, clip_eps=0.2)
    value, _ = loss(lora, dict(learner.params), batch, clip_eps_high=0.28)
    # advantage +1 (3 tokens): -min(2, 1.28) = -1.28 each; advantage -1 (9 tokens): -min(-2,
    # -1.28) = 2 each (the pessimistic side is the unclipped one)
    assert float(value) == pytest.approx(3 * -1.28 + 9 * 2.0, rel=1e-4)
    symmetric, _ = loss(lora, dict(learner.params), batch)
    assert float(symmetric) == pytest.approx(3 * -1.2 + 9 * 2.0, rel=1e-4)


def test_the_schedules_give_the_numpy_learning_rates_per_update() -> None:
    lr, steps, warmup = 1e-3, 10, 3
    i = np.arange(steps)
    ramp = lr * (i + 1) / (warmup + 1)
    j = i - warmup
    expected = {
        "constant": np.where(i < warmup, ramp, lr),
        "linear": np.where(i < warmup, ramp, lr * (1 - j / (steps - warmup))),
        "cosine": np.where(i < warmup, ramp, lr * 0.5 * (1 + np.cos(np.pi * j / (steps - warmup)))),
    }
    for schedule, rates in expected.items():
        spec = OptimizerSpec(learning_rate=lr, lr_schedule=schedule, warmup_steps=warmup)  # type: ignore[arg-type]
        got = np.array([spec.rate(int(k), steps) for k in i])
        np.testing.assert_allclose(got, rates, rtol=1e-6)
    assert OptimizerSpec().rate(5, steps) == 5e-4  # the default: today's constant rate


def test_an_update_records_its_scheduled_learning_rate() -> None:
    learner = _learner(OptimizerSpec(learning_rate=1e-3, lr_schedule="linear"), steps=4)
    rates = [learner.update(_groups()).learning_rate for _ in range(3)]
    assert rates == pytest.approx([1e-3, 7.5e-4, 5e-4])


def _on_policy(groups: tuple[TrainGroup, ...], learner: LoraLearner) -> tuple[TrainGroup, ...]:
    """``groups`` with the sampler's logprobs set to ``learner``'s (ratio 1 but for float
    noise)."""
    out = []
    for group in groups:
        sequences = []
        for s in group.sequences:
            mine = (0.0, *(float(x) for x in _logprobs(learner, s, group.temperature)))
            logprobs = tuple(p if m else 0.0 for p, m in zip(mine, s.mask, strict=True))
            sequences.append(attrs.evolve(s, sampler_logprobs=logprobs))
        out.append(attrs.evolve(group, sequences=tuple(sequences)))
    return tuple(out)


def test_a_second_pass_is_a_second_update_on_the_same_batch_off_policy() -> None:
    groups = _on_policy(_groups(), _learner(OptimizerSpec()))
    twice = _learner(OptimizerSpec(passes=2, learning_rate=0.05))
    once = _learner(OptimizerSpec(learning_rate=0.05))
    first = once.update(groups)
    second = once.update(groups)
    # the second pass sees the weights the first moved: its ratio is further from 1
    assert first.log_ratio_mean < 1e-5  # on-policy
    assert second.log_ratio_mean > 1e-2
    stats = twice.update(groups)
    assert stats.log_ratio_mean == pytest.approx(first.log_ratio_mean, abs=1e-6)  # before it
    assert stats.clip_fraction == pytest.approx(second.clip_fraction)  # the last pass's
    for kind, (a, b) in twice.lora_arrays().items():
        np.testing.assert_allclose(a, once.lora_arrays()[kind][0], atol=1e-6)
        np.testing.assert_allclose(b, once.lora_arrays()[kind][1], atol=1e-6)


def test_minibatches_are_one_update_per_share_of_the_groups() -> None:
    groups = _groups()
    split = _learner(OptimizerSpec(minibatches=2))
    apart = _learner(OptimizerSpec())
    split.update(groups)
    apart.update(groups[:1])
    apart.update(groups[1:])
    for kind, (a, b) in split.lora_arrays().items():
        np.testing.assert_allclose(a, apart.lora_arrays()[kind][0], atol=1e-6)
        np.testing.assert_allclose(b, apart.lora_arrays()[kind][1], atol=1e-6)


def test_the_kl_to_the_base_model_is_zero_without_a_delta_and_the_k3_estimate_after() -> None:
    groups = _groups()
    fresh = LoraLearner(_base(), LORA, OptimizerSpec(kl_coef=0.1), seed=3)  # B = 0
    assert fresh.update(groups).kl == 0.0
    learner = _learner(OptimizerSpec(kl_coef=0.1))
    base = LoraLearner(_base(), LORA, OptimizerSpec(), seed=3)  # the adapter-free model
    k3 = []
    for group in groups:
        for s in group.sequences:
            on = np.asarray(s.mask[1:]) > 0
            p = _logprobs(learner, s, group.temperature)[on].astype(np.float64)
            r = _logprobs(base, s, group.temperature)[on].astype(np.float64) - p
            k3.append(np.exp(r) - r - 1)
    expected = np.concatenate(k3).mean()
    assert expected > 1e-4
    plain = _learner(OptimizerSpec())
    stats, without = learner.update(groups), plain.update(groups)
    assert stats.kl == pytest.approx(expected, rel=1e-3)
    assert without.kl is None
    # the term adds beta * mean k3 to the token-normalised loss
    assert stats.loss == pytest.approx(without.loss + 0.1 * expected, rel=1e-4, abs=1e-7)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"loss_norm": "mean"}, "--loss-norm"),
        ({"clip_eps": 1.5}, "--clip-eps"),
        ({"clip_eps_high": 0.0}, "--clip-eps-high"),
        ({"lr_schedule": "step"}, "--lr-schedule"),
        ({"warmup_steps": -1}, "--warmup-steps"),
        ({"passes": 0}, "--passes"),
        ({"minibatches": 0}, "--minibatches"),
        ({"kl_coef": -0.1}, "--kl-coef"),
    ],
)
def test_a_bad_knob_is_a_config_error_naming_it(options: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        OptimizerSpec(**options)  # type: ignore[arg-type]


def test_resume_names_each_knob_and_takes_a_run_recorded_before_the_knobs(tmp_path: Path) -> None:
    config = TrainConfig(output=tmp_path)
    record = config_record(config)
    for knob in ("loss_norm", "clip_eps_high", "lr_schedule", "passes", "kl_coef"):
        del record["optimizer"][knob]  # a run.json written before the knob existed
    assert resume_differences(record, config) == []
    other = attrs.evolve(config, optimizer=OptimizerSpec(loss_norm="sequence", passes=2))
    assert resume_differences(record, other) == [
        "--loss-norm: recorded 'token', given 'sequence'",
        "--passes: recorded 1, given 2",
    ]
    cosine = attrs.evolve(config, optimizer=OptimizerSpec(lr_schedule="cosine"))
    longer = attrs.evolve(cosine, steps=40)
    assert resume_differences(config_record(cosine), longer) == ["--steps: recorded 20, given 40"]
    assert resume_differences(record, attrs.evolve(config, steps=40)) == []
