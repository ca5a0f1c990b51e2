"""End-of-turn ids: a turn ended by any declared end id gives the same trace shape, bridge and
zero drift as one ended by EOS; its text never reaches the parser."""

from __future__ import annotations

from typing import Any

import pytest
from hermes_loop import (
    AgentLoop,
    HFTokenizer,
    JinjaChatTemplate,
    TemplateBridge,
    TokenLedger,
    TokenModel,
    default_end_token_ids,
    template_end_token,
)
from hermes_protocols import Generation, Message, StopReason
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

safe_text = st.text(
    alphabet=st.characters(codec="ascii", categories=["L", "N"]) | st.sampled_from(" .,!?"),
    min_size=1,
    max_size=20,
).map(str.strip)
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=30)


def special(tok: HFTokenizer, text: str) -> int:
    (token,) = tok.encode(text)
    return token


def chatml_tool_bridge(results: list[str]) -> str:
    """Independent oracle: ChatML + Hermes fallback after a tool-calling turn, minus the
    end-of-turn token the model sampled."""
    body = "".join(
        f"<|im_start|>tool\n<tool_response>\n{r}\n</tool_response><|im_end|>\n" for r in results
    )
    return "\n" + body + "<|im_start|>assistant\n"


def test_default_end_ids_are_eos_plus_the_templates_end_of_turn_token(
    hf_tokenizer: HFTokenizer,
) -> None:
    tok = hf_tokenizer
    im_end, endoftext = special(tok, "<|im_end|>"), special(tok, "<|endoftext|>")
    turn_end = TemplateBridge(tok.chat_template).turn_end
    assert turn_end == "<|im_end|>\n"
    assert template_end_token(tok, turn_end) == im_end
    assert default_end_token_ids(tok, turn_end) == {im_end}  # EOS is <|im_end|> here
    assert template_end_token(tok, "\n\n") is None  # a blank turn end has no end token
    assert template_end_token(tok, "") is None
    ledger = TokenLedger(tok, tok.chat_template)
    assert ledger.end_ids == {im_end}
    assert TokenLedger(tok, tok.chat_template, end_token_ids=[endoftext, im_end]).end_ids == {
        endoftext,
        im_end,
    }


@pytest.mark.anyio
@fixture_ok
@given(
    turns=st.lists(
        st.tuples(st.lists(safe_text, min_size=1, max_size=2), st.booleans()), max_size=3
    ),
    answer=safe_text,
    answer_alt_end=st.booleans(),
)
@pytest.mark.parametrize("template_name", ["chatml-hermes-fallback", "qwen-like"])
async def test_turns_ended_by_another_end_id_give_exact_trace_and_zero_drift(
    kit: Any,
    hf_tokenizer: HFTokenizer,
    template_name: str,
    turns: list[tuple[list[str], bool]],
    answer: str,
    answer_alt_end: bool,
) -> None:
    tok = hf_tokenizer
    im_end, endoftext = special(tok, "<|im_end|>"), special(tok, "<|endoftext|>")
    source = kit.CHATML if template_name == "chatml-hermes-fallback" else kit.QWEN_LIKE
    template = JinjaChatTemplate(source)
    generations = []
    for texts, alt_end in turns:
        body = "\n".join(kit.call_text("echo", {"text": t}) for t in texts)
        ids = [*tok.encode(body), endoftext if alt_end else im_end]
        generations.append(Generation(ids, [-0.3] * len(ids), "stop"))
    final = [*tok.encode(answer or "done"), endoftext if answer_alt_end else im_end]
    generations.append(Generation(final, [-0.4] * len(final), "stop"))
    backend = kit.ScriptedTokenBackend(generations)
    model = TokenModel(
        backend, tok, template, kit.HermesTestParser(), end_token_ids={im_end, endoftext}
    )
    executor = kit.RecordingExecutor(lambda name, args: f"got {args['text']}")
    initial = [Message.system("Be brief."), Message.user("go")]
    result = await AgentLoop(model).run(initial, tools=[kit.ECHO], executor=executor)

    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert not result.tool_errors
    # the end token's text never reached the parser: every call ran, the answer is clean
    assert [c[1]["text"] for c in executor.calls] == [t for texts, _ in turns for t in texts]
    assert result.messages[-1] == Message.assistant(answer or "done")
    # the trace is the ledger the backend saw plus the final generation, mask/logprobs aligned
    trace = result.trace
    assert trace is not None
    assert list(trace.ids) == [*backend.prompts[-1], *final]
    position = len(backend.prompts[0])
    for index, generation in enumerate(generations):
        end = position + len(generation.ids)
        assert list(trace.ids[position:end]) == list(generation.ids)
        assert list(trace.mask[position:end]) == [1] * len(generation.ids)
        assert list(trace.logprobs[position:end]) == list(generation.logprobs)
        if index + 1 < len(generations):
            bridge = backend.prompts[index + 1][end:]
            assert backend.prompts[index + 1][:end] == list(trace.ids[:end])
            assert set(trace.mask[end : end + len(bridge)]) <= {0}
            if template_name == "chatml-hermes-fallback":
                results = [f"got {t}" for t in turns[index][0]]
                assert tok.decode(bridge) == chatml_tool_bridge(results)
            position = end + len(bridge)
    assert result.drift is not None
    assert result.drift.mismatches == 0, result.drift
    assert result.drift.length_delta == 0


@pytest.mark.anyio
async def test_undeclared_end_id_is_text(kit: Any, hf_tokenizer: HFTokenizer) -> None:
    """The contrast: without declaring <|endoftext|> as an end id, it is part of the answer."""
    tok = hf_tokenizer
    endoftext = special(tok, "<|endoftext|>")
    final = [*tok.encode("done"), endoftext]
    backend = kit.ScriptedTokenBackend([Generation(final, [-0.1] * len(final), "stop")])
    model = TokenModel(backend, tok, tok.chat_template, kit.HermesTestParser())
    result = await AgentLoop(model).run(
        [Message.user("go")], tools=[], executor=kit.RecordingExecutor()
    )
    assert result.messages[-1] == Message.assistant("done<|endoftext|>")


def test_ledger_drift_compares_a_stand_in_end_id_with_the_templates(
    hf_tokenizer: HFTokenizer,
) -> None:
    tok = hf_tokenizer
    im_end, endoftext = special(tok, "<|im_end|>"), special(tok, "<|endoftext|>")
    ledger = TokenLedger(tok, tok.chat_template, end_token_ids=[im_end, endoftext])
    ledger.start([Message.user("x")])
    ids = [*tok.encode("hello"), endoftext]
    ledger.add_generation(Generation(ids, [-1.0] * len(ids), "stop"))
    bridge = ledger.add_messages([Message.user("more")])
    assert tok.decode(bridge) == "\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n"
    ledger.add_generation(Generation(ids, [-1.0] * len(ids), "stop"))
    messages = [
        Message.user("x"),
        Message.assistant("hello"),
        Message.user("more"),
        Message.assistant("hello"),
    ]
    report = ledger.drift(messages)
    assert report.mismatches == 0
    assert report.length_delta == 0
    assert ledger.trace().ids.count(endoftext) == 2  # the trace keeps what was sampled
