"""Any environment of ours as tinker-cookbook's ``Env`` and ``EnvGroupBuilder``.

Each ``Env`` is one :class:`hermes_rollouts.DrivenEpisode`: its slot is acquired and its
workspace set up before the first observation, each observation is the prompt our ledger built
(our chat template, tool results rendered after the ids the policy produced, never
re-tokenized), each action is parsed by our parser and its tool calls run on that slot. The last
step ends the episode once our loop does; the group's rewards are our verifier's, judged on the
same slot. A rollout that could not be judged raises
:class:`hermes_rollouts.InfrastructureFailure` (never a 0.0 reward); ``cleanup`` cancels what
still runs and waits for every slot's release.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hermes_protocols import BackendError, FinishReason, Item, ScoredRollout
from hermes_rollouts import (
    Action,
    DrivenEpisode,
    DrivenSession,
    InfrastructureFailure,
    derive_seed,
    judged_reward,
)

from hermes_tinker_cookbook_env.cookbook_import import Env, EnvGroupBuilder, StepResult, tinker

#: looks up the logprobs a policy sampled an action with after a prompt (``None``: unknown)
LogprobLookup = Callable[[tuple[int, ...], tuple[int, ...]], tuple[float, ...] | None]
FINISH_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length"}


def _no_logprobs(prompt: tuple[int, ...], action: tuple[int, ...]) -> None:
    return None


class HermesEnv(Env):  # type: ignore[misc]
    """One episode of one item (see the module doc)."""

    def __init__(self, episode: DrivenEpisode, stop: list[int], logprobs: LogprobLookup) -> None:
        self.episode = episode
        self._stop = stop
        self._logprobs = logprobs
        self._prompt: tuple[int, ...] = ()

    async def initial_observation(self) -> tuple[Any, list[int]]:
        found = await self.episode.start()
        if isinstance(found, ScoredRollout):
            judged_reward(found)  # raises for an infrastructure failure
            raise BackendError("the rollout ended before its first generation")
        self._prompt = found
        return tinker.ModelInput.from_ints(list(found)), self._stop

    async def step(self, action: list[int], *, extra: dict[str, Any] | None = None) -> Any:
        ids = tuple(action)
        reason = FINISH_REASONS.get(str((extra or {}).get("stop_reason", "stop")), "stop")
        found = await self.episode.step(
            Action(ids, self._logprobs(self._prompt, ids), finish_reason=reason)
        )
        if isinstance(found, ScoredRollout):
            judged_reward(found)  # an unjudged rollout raises here, not as a 0.0 reward
            return StepResult(
                reward=0.0,
                episode_done=True,
                next_observation=tinker.ModelInput.from_ints([]),
                next_stop_condition=self._stop,
                metrics={"hermes/turns": found.result.turns if found.result else 0},
            )
        self._prompt = found
        return StepResult(
            reward=0.0,
            episode_done=False,
            next_observation=tinker.ModelInput.from_ints(list(found)),
            next_stop_condition=self._stop,
        )


class HermesEnvGroupBuilder(EnvGroupBuilder):  # type: ignore[misc]
    """``group_size`` episodes of ``item`` in ``driven``'s session, member ``i`` seeded from
    ``seed``; the group rewards are our verifier's. ``logprobs`` (e.g.
    :meth:`HermesTokenCompleter.take_logprobs`) gives the ledger the policy's logprobs.

    Not picklable: the session (pool, model) lives in this process."""

    def __init__(
        self,
        driven: DrivenSession,
        item: Item,
        *,
        group_size: int,
        seed: int = 0,
        logprobs: LogprobLookup = _no_logprobs,
    ) -> None:
        self._driven = driven
        self._item = item
        self._group_size = group_size
        self._seed = seed
        self._logprobs = logprobs
        self.envs: list[HermesEnv] = []

    async def make_envs(self) -> Sequence[HermesEnv]:
        stop = sorted(self._driven.end_token_ids)
        self.envs = [
            HermesEnv(
                self._driven.episode(
                    self._item,
                    seed=derive_seed(self._seed, f"{self._item.id}/{index}"),
                    group_index=index,
                ),
                stop,
                self._logprobs,
            )
            for index in range(self._group_size)
        ]
        return self.envs

    async def compute_group_rewards(
        self, trajectory_group: list[Any], env_group: Sequence[HermesEnv]
    ) -> list[tuple[float, dict[str, float | int]]]:
        rewards: list[tuple[float, dict[str, float | int]]] = []
        for env in env_group:
            rollout = env.episode.rollout
            if rollout is None:
                raise InfrastructureFailure("a rollout of the group did not finish")
            reward = judged_reward(rollout)
            metrics = dict(rollout.score.metrics) if rollout.score is not None else {}
            rewards.append((reward, {f"hermes/{k}": v for k, v in metrics.items()}))
        return rewards

    async def cleanup(self) -> None:
        for env in self.envs:
            await env.episode.close()

    def logging_tags(self) -> list[str]:
        return ["hermes", self._driven.session.environment_name]
