"""The embedded token backend around a scripted llama runtime (no model load): it stops on every
end-of-generation id the model declares, the loop treats a turn ended by any of them exactly,
and closing it fails queued requests instead of running them."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread
import pytest
from hermes_loop import AgentLoop, HFTokenizer, TokenModel
from hermes_loop.embedded import EmbeddedTokenBackend
from hermes_protocols import BackendError, Generation, Message, SamplingParams, StopReason

GREEDY = SamplingParams(temperature=0.0, max_tokens=64)


@pytest.mark.anyio
@pytest.mark.parametrize("end", [0, 2, 4])
async def test_generation_stops_on_every_declared_end_id(kit: Any, end: int) -> None:
    runtime: Any = kit.ScriptedRuntime([40, 41, 42, end, 43, 44], eog_ids={0, 2, 4})
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
    runtime: Any = kit.ScriptedRuntime([*first, *second], eog_ids={endoftext, tok.eos_token_id})
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


@pytest.mark.anyio
async def test_aclose_lets_the_running_request_finish_and_fails_queued_ones(kit: Any) -> None:
    runtime: Any = kit.ScriptedRuntime([40] * 1000, eog_ids={0}, delay_s=0.01)
    backend = EmbeddedTokenBackend(runtime)
    sampling = SamplingParams(temperature=0.0, max_tokens=20)
    outcomes: dict[str, Any] = {}

    async def request(name: str) -> None:
        try:
            outcomes[name] = await backend.generate([5, 6], sampling=sampling)
        except BackendError as exc:
            outcomes[name] = exc

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(request, "running")
            await anyio.to_thread.run_sync(runtime.started.wait, 10)
            for name in ("queued1", "queued2", "queued3"):
                group.start_soon(request, name)
            await anyio.wait_all_tasks_blocked()
            await backend.aclose()
    running = outcomes["running"]
    assert isinstance(running, Generation)
    assert len(running.ids) == 20  # the request that had the model ran to its end
    for name in ("queued1", "queued2", "queued3"):
        assert isinstance(outcomes[name], BackendError), outcomes[name]
        assert "closed" in str(outcomes[name])
    assert runtime.closed
    assert runtime.n_cached <= 2 + 20  # nothing ran after the first request
    with pytest.raises(BackendError, match="closed"):
        await backend.generate([5], sampling=sampling)
    await backend.aclose()  # idempotent
