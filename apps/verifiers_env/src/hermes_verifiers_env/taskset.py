"""Our environment's items as a verifiers taskset."""

from __future__ import annotations

from collections.abc import Iterator

from hermes_protocols import Environment
from hermes_rollouts import EnvironmentSpec, build_environment, item_json

from hermes_verifiers_env.config import HermesTaskData, HermesTasksetConfig
from hermes_verifiers_env.verifiers_import import vf


def resolve(environment: str, options: dict[str, object]) -> Environment:
    """The environment ``environment`` names, built with ``options``; a bad reference raises
    one :class:`~hermes_protocols.ConfigError` naming the taskset option."""
    spec = EnvironmentSpec(name=environment, options=options)
    names = {"environment.name": "--env.taskset.environment"}
    names["environment.options"] = "--env.taskset.options"
    return build_environment(spec, names)


class HermesTask(vf.Task[HermesTaskData]):  # type: ignore[misc]
    """One item; the harness runs it, setup and verification included, in our sandbox."""


class HermesTaskset(vf.Taskset[HermesTask, HermesTasksetConfig]):  # type: ignore[misc]
    """The items of ``config.environment`` for ``config.seed`` and ``config.split`` (endless
    for an endless environment: bound a run with ``-n``)."""

    INFINITE = True

    def __init__(self, config: HermesTasksetConfig) -> None:
        super().__init__(config)
        self.environment = resolve(config.environment, dict(config.options))

    def load(self) -> Iterator[HermesTask]:
        config = self.config
        for item in self.environment.items(seed=config.seed, split=config.split):
            users = [m.content for m in self.environment.prompt(item) if m.role == "user"]
            data = HermesTaskData(
                id=item.id,
                name=item.id,
                prompt=users[-1] if users and users[-1] else item.id,
                environment=config.environment,
                options=dict(config.options),
                item=item_json(item),
            )
            yield HermesTask(data, config.task)
