"""The embedded token backend stops on every end-of-generation id the model declares, and the
loop treats a turn ended by any of them exactly (no model load: a scripted llama runtime)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hermes_loop import AgentLoop, HFTokenizer, TokenModel
from hermes_loop.embedded import EmbeddedTokenBackend
from hermes_protocols import Message, SamplingParams, StopReason

GREEDY = SamplingParams(temperature=0.0, max_tokens=64)


class ScriptedRuntime:
    """Stands in for :class:`LlamaRuntime`: each evaluation returns logits whose argmax is the
    next id of ``script``; ``eog_ids`` are the declared end-of-generation ids."""

    def __init__(self, script: Sequence[int], eog_ids: set[int], n_vocab: int = 400) -> None:
        self.script = list(script)
        self.eog_ids = frozenset(eog_ids)
        self.n_vocab = n_vocab
        self.n_ctx = 4096
        self.n_batch = 512
        self._tokens: list[int] = []

    @property
    def cached(self) -> tuple[int, ...]:
        return tuple(self._tokens)

    @property
    def n_cached(self) -> int:
        return len(self._tokens)

    def common_prefix(self, ids: Sequence[int]) -> int:
        n = 0
        for a, b in zip(self._tokens, ids, strict=False):
            if a != b:
                break
            n += 1
        return n

    def truncate(self, keep: int) -> None:
        del self._tokens[keep:]

    def _next_logits(self) -> Any:
        logits = np.zeros(self.n_vocab, dtype=np.float32)
        logits[self.script.pop(0)] = 12.0
        return logits

    def feed(self, ids: Sequence[int], *, all_logits: bool = False) -> Any:
        self._tokens.extend(ids)
        return self._next_logits()

    def feed_one(self, token: int) -> Any:
        self._tokens.append(token)
        return self._next_logits()

    def piece(self, token: int) -> bytes:
        return b"x"

    def close(self) -> None:
        pass


@pytest.mark.anyio
@pytest.mark.parametrize("end", [0, 2, 4])
async def test_generation_stops_on_every_declared_end_id(end: int) -> None:
    runtime: Any = ScriptedRuntime([40, 41, 42, end, 43, 44], eog_ids={0, 2, 4})
    backend = EmbeddedTokenBackend(runtime)
    assert backend.end_token_ids == {0, 2, 4}
    generation = await backend.generate([5, 6, 7], sampling=GREEDY)
    assert generation.ids == (40, 41, 42, end)  # the end id is included, nothing after it
    assert generation.finish_reason == "stop"
    assert len(generation.logprobs) == 4


@pytest.mark.anyio
async def test_rollout_on_the_embedded_backend_ending_turns_with_a_non_default_end_id(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    tok = hf_tokenizer
    endoftext = tok.encode("<|endoftext|>")[0]  # not the EOS (<|im_end|>) of this tokenizer
    assert endoftext != tok.eos_token_id
    first = [*tok.encode(kit.call_text("echo", {"text": "hi"})), endoftext]
    second = [*tok.encode("said hi"), endoftext]
    runtime: Any = ScriptedRuntime([*first, *second], eog_ids={endoftext, tok.eos_token_id})
    backend = EmbeddedTokenBackend(runtime)
    model = TokenModel(
        backend,
        tok,
        tok.chat_template,
        kit.HermesTestParser(),
        end_token_ids=backend.end_token_ids,
    )
    executor = kit.RecordingExecutor(lambda name, args: "hi")
    result = await AgentLoop(model, sampling=GREEDY).run(
        [Message.user("say hi")], tools=[kit.ECHO], executor=executor
    )
    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert executor.calls == [("echo", {"text": "hi"})]
    assert result.messages[-1] == Message.assistant("said hi")
    prompt = tok.encode(
        tok.chat_template.render(
            [Message.user("say hi")], tools=[kit.ECHO], add_generation_prompt=True
        )
    )
    bridge = tok.encode(
        "\n<|im_start|>tool\n<tool_response>\nhi\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert result.trace is not None
    assert list(result.trace.ids) == [*prompt, *first, *bridge, *second]
    assert list(result.trace.mask) == (
        [0] * len(prompt) + [1] * len(first) + [0] * len(bridge) + [1] * len(second)
    )
    assert result.drift is not None
    assert result.drift.mismatches == 0
    assert result.drift.length_delta == 0
