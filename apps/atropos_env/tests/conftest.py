"""Fixtures for the adapter's unit tests: rollout factories, a byte-level HF tokenizer saved
to a local directory (no hub), and a scripted rollout source built from real value types."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hermes_protocols.agent import AgentResult, StopReason, ToolCallError, ToolErrorKind
from hermes_protocols.environment import FailureKind, Item, RolloutFailure, Score, ScoredRollout
from hermes_protocols.messages import Message, ToolCall
from hermes_protocols.tokens import TokenTrace

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] or '' }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

MakeRollout = Callable[..., ScoredRollout]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _messages() -> list[Message]:
    call = ToolCall(id="call_0", name="terminal", arguments='{"command": "ls"}')
    return [
        Message.system("You are a shell agent."),
        Message.user("List the files."),
        Message.assistant(None, (call,), reasoning="I should run ls."),
        Message.tool("a.txt\nb.txt", tool_call_id="call_0", name="terminal"),
        Message.assistant("Done: a.txt, b.txt"),
    ]


@pytest.fixture(scope="session")
def make_rollout() -> MakeRollout:
    """Build a ScoredRollout: a scored one by default, or a failed one with ``failure=``."""
    counter = itertools.count()

    def make(
        trace: TokenTrace | None = None,
        *,
        reward: float = 1.0,
        failure: FailureKind | None = None,
        score_failure: FailureKind | None = None,
        item: Item | None = None,
        tool_errors: Sequence[ToolErrorKind] = (),
        stop_reason: StopReason = StopReason.FINAL_ANSWER,
    ) -> ScoredRollout:
        index = next(counter)
        item = item or Item(id="item-0", data={})
        if trace is None:
            trace = TokenTrace().append_context([1, 2, 3]).append_generated([4, 5], [-0.5, -0.25])
        result = AgentResult(
            messages=_messages(),
            stop_reason=stop_reason,
            turns=2,
            trace=trace,
            tool_errors=[
                ToolCallError(kind=k, turn=1, tool="terminal", arguments="{", message="bad")
                for k in tool_errors
            ],
        )
        if failure is not None:
            return ScoredRollout(
                id=f"r{index}",
                env="scripted",
                item=item,
                group_index=index,
                result=None,
                score=None,
                failure=RolloutFailure(kind=failure, phase="acquire", message="sandbox died"),
            )
        return ScoredRollout(
            id=f"r{index}",
            env="scripted",
            item=item,
            group_index=index,
            result=result,
            score=Score(reward=reward, failure=score_failure),
        )

    return make


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE tokenizer (no merges) with a chat template, saved locally."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    vocab["<|eos|>"] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|eos|>")
    tokenizer.chat_template = CHAT_TEMPLATE
    path = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save_pretrained(str(path))
    return path


class ScriptedSource:
    """A RolloutSource whose rollouts come from a callable (real value types, no model)."""

    def __init__(
        self,
        produce: Callable[[Item, int], Sequence[ScoredRollout]],
        retokenize: Callable[[AgentResult], TokenTrace] | None = None,
    ) -> None:
        self._produce = produce
        self._retokenize = retokenize
        self.groups_run: list[tuple[str, int]] = []
        self.opened = 0
        self.closed = 0

    @property
    def environment_name(self) -> str:
        return "scripted"

    def items(self, *, split: str, seed: int) -> Iterator[Item]:
        for index in itertools.count():
            yield Item(id=f"{split}-{seed}-{index}", data={"n": index}, split=split)

    async def sync_weights(self) -> str | None:
        return None

    async def run_group(self, item: Item, group_size: int) -> Sequence[ScoredRollout]:
        self.groups_run.append((item.id, group_size))
        return self._produce(item, group_size)

    def retokenize(self, result: AgentResult) -> TokenTrace:
        assert self._retokenize is not None
        return self._retokenize(result)

    def factory(self, *_: Any) -> Any:
        @asynccontextmanager
        async def opened() -> AsyncIterator[ScriptedSource]:
            self.opened += 1
            try:
                yield self
            finally:
                self.closed += 1

        return opened()


@pytest.fixture
def scripted_source() -> Callable[..., ScriptedSource]:
    return ScriptedSource
