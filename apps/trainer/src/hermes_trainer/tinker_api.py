"""The Tinker API as the trainer's model: sampling and training on a Tinker server.

A :class:`tinker.ServiceClient` at ``TinkerSpec.url`` (Thinking Machines' service when unset,
with ``$TINKER_API_KEY``; or an open-source server such as SkyRL's ``skyrl-tx``) gives a LoRA
training client on ``base_model`` and sampling clients on the weights it saves. Rollouts sample
through :class:`TinkerSampler` (a :class:`~hermes_protocols.TokenBackend`), so they come from
the weights being trained; :class:`TinkerLearner` runs each update as one ``forward_backward``
(the clipped ``ppo`` loss, or ``cross_entropy`` for SFT) and one ``optim_step``, then saves the
weights for the sampler.

Tinker's sampler reports each sampled token's logprob at temperature 1 and its trainer scores
at temperature 1, so a run samples at temperature 1 (:class:`TrainConfig` checks it): the
recorded logprobs are then the sampling distribution's, as the importance ratio needs.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Literal

import anyio
import anyio.to_thread
import attrs
import numpy as np
import tinker
from hermes_protocols import (
    BackendError,
    FinishReason,
    Generation,
    SamplingParams,
    ToolCallParser,
)
from hermes_rollouts import ModelHandle, ModelOpener, TokenizerDir
from tinker import types

from hermes_trainer.grpo import Objective, TrainGroup
from hermes_trainer.learner import UpdateStats
from hermes_trainer.optimizer import OptimizerSpec
from hermes_trainer.tinker_spec import TinkerSpec

#: the SDK's placeholder key for a server that does not check keys (a local skyrl-tx)
LOCAL_API_KEY = "tml-local"


def service_client(spec: TinkerSpec) -> tinker.ServiceClient:
    """A client of ``spec``'s server (a local one gets a placeholder key when none is set)."""
    key = os.environ.get("TINKER_API_KEY")
    if spec.url is None:
        if not key:
            raise BackendError(
                "the Tinker service needs TINKER_API_KEY; or pass --tinker-url for a local server"
            )
        return tinker.ServiceClient(api_key=key)
    return tinker.ServiceClient(base_url=spec.url, api_key=key or LOCAL_API_KEY)


_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length"}
SEED_MODULUS = 2**31


@contextmanager
def tinker_call(call: str, timeout_s: float) -> Iterator[None]:
    """Bound an SDK call to ``timeout_s``; its failures (the SDK raises ``ValueError`` and its
    own ``TinkerError``s) and its timeout as :class:`BackendError` naming the call."""
    try:
        with anyio.fail_after(timeout_s):
            yield
    except TimeoutError as exc:
        raise BackendError(
            f"Tinker {call} got no answer within {timeout_s:g} s; raise --tinker-timeout"
        ) from exc
    except (tinker.TinkerError, ValueError) as exc:
        raise BackendError(f"Tinker {call}: {exc}") from exc


class TinkerSampler:
    """A :class:`~hermes_protocols.TokenBackend` over a Tinker sampling client; :meth:`use`
    switches it to other saved weights."""

    def __init__(
        self,
        service: tinker.ServiceClient,
        client: tinker.SamplingClient,
        *,
        stop_ids: frozenset[int],
        timeout_s: float,
    ) -> None:
        self._service = service
        self._client = client
        self._stop = sorted(stop_ids)
        self._timeout_s = timeout_s

    async def use(self, path: str | Path | None) -> None:
        """Sample from the weights saved at ``path`` (a ``tinker://`` path) from now on."""
        if path is None:
            raise BackendError("the Tinker sampler cannot go back to the base weights")
        with tinker_call("create_sampling_client", self._timeout_s):
            self._client = await self._service.create_sampling_client_async(model_path=str(path))

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        if sampling.stop:
            # a Tinker request stops on ids or on strings, not both; turns end on the end ids
            raise BackendError("the Tinker sampler stops on the model's end ids, not on strings")
        params = types.SamplingParams(
            max_tokens=sampling.max_tokens,
            # servers seed a 32-bit PRNG (skyrl-tx refuses larger seeds)
            seed=None if sampling.seed is None else sampling.seed % SEED_MODULUS,
            stop=self._stop,
            temperature=sampling.temperature,
            top_k=sampling.top_k or -1,
            top_p=sampling.top_p,
        )
        prompt = types.ModelInput.from_ints(list(prompt_ids))
        with tinker_call("sample", self._timeout_s):
            response = await self._client.sample_async(
                prompt=prompt, num_samples=1, sampling_params=params
            )
        (sequence,) = response.sequences
        if sequence.logprobs is None:
            raise BackendError("the Tinker sampler returned no logprobs")
        return Generation(
            ids=sequence.tokens,
            logprobs=sequence.logprobs,
            finish_reason=_FINISH.get(str(sequence.stop_reason), "stop"),
            # temperature-1 logprobs are the sampling distribution's only at temperature 1
            logprob_mode="sampled" if sampling.temperature == 1.0 else "raw",
        )


def _loss(output: types.ForwardBackwardOutput) -> float | None:
    """The update's loss: the server's ``loss:sum`` (Thinking Machines' service), else the sum
    of the per-token ``elementwise_loss`` it returned (skyrl-tx); ``None`` when it sent
    neither. The weights make either a mean per trainable token."""
    if "loss:sum" in output.metrics:
        return float(output.metrics["loss:sum"])
    if output.loss_fn_outputs and all("elementwise_loss" in r for r in output.loss_fn_outputs):
        return float(sum(np.sum(r["elementwise_loss"].data) for r in output.loss_fn_outputs))
    return None


class TinkerLearner:
    """LoRA updates on a Tinker training client; see the module doc."""

    def __init__(
        self,
        client: tinker.TrainingClient,
        optimizer: OptimizerSpec,
        *,
        objective: Objective,
        timeout_s: float,
    ) -> None:
        self._client = client
        self._optimizer = optimizer
        self._objective = objective
        self._timeout_s = timeout_s

    async def update(self, groups: Sequence[TrainGroup]) -> UpdateStats:
        """One ``forward_backward`` + ``optim_step`` on ``groups``; the log ratio is measured
        on the trainer's logprobs of that forward pass (before the step)."""
        started = time.perf_counter()
        sequences = [s for group in groups for s in group.sequences]
        trainable = sum(s.trainable for s in sequences)
        if trainable == 0:
            raise ValueError("an update needs at least one trainable token")
        loss_fn: Literal["ppo", "cross_entropy"] = (
            "cross_entropy" if self._objective == "sft" else "ppo"
        )
        data = []
        for s in sequences:
            on = np.asarray(s.mask[1:], dtype=np.float32)
            targets = np.asarray(s.ids[1:], dtype=np.int64)
            inputs = {"target_tokens": types.TensorData.from_numpy(targets)}
            # per-token weights summing to 1 over the batch: the loss is a mean per token
            weight = on * np.float32(s.advantage / trainable)
            if loss_fn == "cross_entropy":
                inputs["weights"] = types.TensorData.from_numpy(weight)
            else:
                sampler = np.asarray(s.sampler_logprobs[1:], dtype=np.float32)
                inputs["logprobs"] = types.TensorData.from_numpy(sampler)
                inputs["advantages"] = types.TensorData.from_numpy(weight)
            model_input = types.ModelInput.from_ints(list(s.ids[:-1]))
            data.append(types.Datum(model_input=model_input, loss_fn_inputs=inputs))
        with tinker_call("forward_backward", self._timeout_s):
            future = await self._client.forward_backward_async(data, loss_fn)
            output = await future.result_async()
        adam = types.AdamParams(learning_rate=self._optimizer.learning_rate)
        with tinker_call("optim_step", self._timeout_s):
            await (await self._client.optim_step_async(adam)).result_async()
        ratios = []
        for s, record in zip(sequences, output.loss_fn_outputs, strict=True):
            trainer = np.asarray(record["logprobs"].data, dtype=np.float64)
            trained = np.asarray(s.mask[1:]) > 0
            sampler = np.asarray(s.sampler_logprobs[1:], dtype=np.float64)
            ratios.append(trainer[trained] - sampler[trained])
        log_ratio = np.abs(np.concatenate(ratios))
        return UpdateStats(
            loss=_loss(output),
            log_ratio_mean=float(log_ratio.mean()),
            log_ratio_max=float(log_ratio.max()),
            trainable_tokens=trainable,
            tokens=sum(len(s.ids) for s in sequences),
            seconds=time.perf_counter() - started,
            learning_rate=self._optimizer.learning_rate,
        )

    async def save(self, step: int) -> str:
        """Save the weights for sampling; their ``tinker://`` path."""
        with tinker_call("save_weights_for_sampler", self._timeout_s):
            future = await self._client.save_weights_for_sampler_async(name=f"step-{step:05d}")
            return (await future.result_async()).path


@attrs.frozen
class TinkerRun:
    """The service client, the training client and the model the sampler serves."""

    service: tinker.ServiceClient
    training: tinker.TrainingClient
    spec: TinkerSpec


@asynccontextmanager
async def open_tinker(spec: TinkerSpec, *, rank: int, seed: int) -> AsyncIterator[TinkerRun]:
    """Connect to the server and create the LoRA training client (attention and MLP, as the
    local learner); the clients are closed on exit."""
    # the client opens its server session with a blocking request
    with tinker_call("create_session", spec.timeout_s):
        service = await anyio.to_thread.run_sync(service_client, spec, abandon_on_cancel=True)
    try:
        with tinker_call("create_lora_training_client", spec.timeout_s):
            training = await service.create_lora_training_client_async(
                base_model=spec.base_model, rank=rank, seed=seed, train_unembed=False
            )
        yield TinkerRun(service, training, spec)
    finally:
        service.holder.close()  # type: ignore[no-untyped-call]


def tinker_model(run: TinkerRun) -> ModelOpener:
    """The rollouts' model: the training client's current weights (saved as step 0) behind a
    :class:`TinkerSampler`, with the tokenizer and chat template of ``tokenizer_dir``;
    ``load_lora(path)`` switches it to weights saved later."""

    @asynccontextmanager
    async def opener(parser: ToolCallParser) -> AsyncIterator[ModelHandle]:
        spec = run.spec
        tokenizer = await TokenizerDir.load(spec.tokenizer_dir)
        with tinker_call("save_weights_for_sampler", spec.timeout_s):
            saved = await (
                await run.training.save_weights_for_sampler_async(name="step-00000")
            ).result_async()
        with tinker_call("create_sampling_client", spec.timeout_s):
            client = await run.service.create_sampling_client_async(model_path=saved.path)
        sampler = TinkerSampler(
            run.service, client, stop_ids=tokenizer.end_ids, timeout_s=spec.timeout_s
        )
        yield tokenizer.model(
            sampler, parser, name=f"tinker:{spec.base_model}", load_lora=sampler.use
        )

    return opener
