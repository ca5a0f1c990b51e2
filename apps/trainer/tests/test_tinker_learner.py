"""The Tinker learner at the SDK boundary, on a fake training client: a call over its time limit
is an error naming the call, the limit and the option; the loss is the server's, never NaN."""

from __future__ import annotations

from typing import cast

import anyio
import pytest
import tinker
from hermes_protocols import BackendError
from hermes_trainer.grpo import TrainGroup
from hermes_trainer.learner import UpdateStats
from hermes_trainer.optimizer import OptimizerSpec
from hermes_trainer.packing import TrainSequence
from hermes_trainer.tinker_api import TinkerLearner
from tinker import types

pytestmark = pytest.mark.slow  # the trainer's dependencies (tinker, JAX)

SEQUENCE = TrainSequence(
    ids=(1, 2, 3, 4), mask=(0, 0, 1, 1), sampler_logprobs=(0.0, 0.0, -0.5, -0.25), advantage=0.5
)
GROUPS = [TrainGroup(sequences=(SEQUENCE,), temperature=1.0)]


class _Future:
    """An SDK future: ``result_async`` answers ``value`` after ``delay_s``."""

    def __init__(self, value: object, delay_s: float = 0.0) -> None:
        self._value = value
        self._delay_s = delay_s

    async def result_async(self) -> object:
        await anyio.sleep(self._delay_s)
        return self._value


class _Client:
    """The two training calls of a :class:`tinker.TrainingClient`, each answering after its
    delay; ``output`` is what ``forward_backward`` returns."""

    def __init__(
        self, output: types.ForwardBackwardOutput, *, forward_s: float = 0.0, optim_s: float = 0.0
    ) -> None:
        self._output = output
        self._forward_s = forward_s
        self._optim_s = optim_s

    async def forward_backward_async(self, data: list[types.Datum], loss_fn: str) -> _Future:
        return _Future(self._output, self._forward_s)

    async def optim_step_async(self, adam: types.AdamParams) -> _Future:
        return _Future(types.OptimStepResponse(), self._optim_s)


def _output(metrics: dict[str, float], **extra: list[float]) -> types.ForwardBackwardOutput:
    fields = {"logprobs": [-1.0, -0.5, -0.25], **extra}
    record = {k: types.TensorData(data=v, dtype="float32") for k, v in fields.items()}
    return types.ForwardBackwardOutput(
        loss_fn_output_type="scalar", loss_fn_outputs=[record], metrics=metrics
    )


def _update(client: _Client, timeout_s: float = 5.0) -> UpdateStats:
    learner = TinkerLearner(
        cast(tinker.TrainingClient, client), OptimizerSpec(), objective="grpo", timeout_s=timeout_s
    )
    return anyio.run(learner.update, GROUPS)


@pytest.mark.parametrize(
    ("call", "delays"),
    [("forward_backward", {"forward_s": 60.0}), ("optim_step", {"optim_s": 60.0})],
)
def test_a_call_over_its_limit_names_the_call_the_limit_and_the_option(
    call: str, delays: dict[str, float]
) -> None:
    with pytest.raises(BackendError) as raised:
        _update(_Client(_output({}), **delays), timeout_s=0.2)
    assert str(raised.value) == (
        f"Tinker {call} got no answer within 0.2 s; raise --tinker-timeout"
    )


def test_the_loss_is_the_servers_sum_or_its_per_token_losses_or_none() -> None:
    assert _update(_Client(_output({"loss:sum": 0.125}))).loss == 0.125
    # skyrl-tx sends no metrics, but each datum's per-token losses
    per_token = _output({}, elementwise_loss=[0.0, -0.25, 0.125])
    assert _update(_Client(per_token)).loss == -0.125
    stats = _update(_Client(_output({})))
    assert stats.loss is None
    assert (stats.log_ratio_mean, stats.log_ratio_max) == (0.0, 0.0)
