"""Run by the tinker-cookbook venv's Python (tests/test_tinker_cookbook_adapter.py): a group
rollout cancelled once its first observations exist, inside a session that stays open. Prints
one JSON line: whether any rollout still runs after the cancellation."""

from __future__ import annotations

import json
import site
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
site.addsitedir(str(ROOT / ".venv/lib/python3.11/site-packages"))
sys.path.append(str(ROOT / "apps/tinker_cookbook_env/src"))

import anyio  # noqa: E402
from hermes_rollouts import (  # noqa: E402
    AgentBudgets,
    EnvironmentSpec,
    ModelSpec,
    PoolSpec,
    RolloutSpec,
    open_driven_session,
)
from hermes_tinker_cookbook_env import (  # noqa: E402
    HermesEnvGroupBuilder,
    HermesTokenCompleter,
)
from hermes_tinker_cookbook_env.cookbook_import import do_group_rollout  # noqa: E402

OPTIONS = {"families": ["write_word"], "difficulties": [1]}


async def main() -> None:
    spec = RolloutSpec(
        model=ModelSpec(server_type="embedded", context_tokens=2048, concurrency=2),
        pool=PoolSpec(name="tc-cancel", slots_per_host=2),
        environment=EnvironmentSpec(name="endless_terminals", options=OPTIONS),
        budgets=AgentBudgets(max_turns=3, max_tokens_per_turn=64),
    )
    async with open_driven_session(spec) as driven:
        completer = HermesTokenCompleter(driven.sampler, driven.end_token_ids, max_tokens=64)
        item = next(iter(driven.session.items()))
        builder = HermesEnvGroupBuilder(driven, item, group_size=2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(do_group_rollout, builder, completer)
            with anyio.fail_after(300):
                # polling: nothing signals an episode's start to the outside
                while not builder.envs or not all(e.episode.running for e in builder.envs):  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        print(
            json.dumps(
                {"started": len(builder.envs), "running": [e.episode.running for e in builder.envs]}
            )
        )


anyio.run(main, backend="asyncio")
