"""Token fidelity: the trace is prompt + generations + bridges, aligned; drift is measured."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hermes_loop import (
    AgentLoop,
    HFTokenizer,
    JinjaChatTemplate,
    LoopLimits,
    TokenLedger,
    TokenModel,
    compare_ids,
)
from hermes_loop.embedded import GGUFTokenizer, default_model_path
from hermes_protocols import Generation, Message, StopReason
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SPECIAL_IDS = 3  # <|endoftext|>, <|im_start|>, <|im_end|> come first in the test vocabulary
plain_ids = st.lists(st.integers(min_value=SPECIAL_IDS, max_value=399), max_size=12)
logprob = st.floats(min_value=-30.0, max_value=0.0, allow_nan=False)
safe_text = st.text(
    alphabet=st.characters(codec="ascii", categories=["L", "N"]) | st.sampled_from(" .,!?"),
    max_size=30,
).map(str.strip)
tool_result = st.text(max_size=40)
patterns = st.lists(logprob, min_size=1, max_size=5)
turn_spec = st.tuples(
    plain_ids,
    st.lists(st.tuples(safe_text, tool_result), min_size=1, max_size=3),
    patterns,
)
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)


def tool_bridge(results: list[str]) -> str:
    """Independent oracle: the ChatML + Hermes-fallback text that follows a tool-calling turn."""
    body = "".join(
        f"<|im_start|>tool\n<tool_response>\n{r}\n</tool_response><|im_end|>\n" for r in results
    )
    return "\n" + body + "<|im_start|>assistant\n"


def tiled(pattern: list[float], n: int) -> list[float]:
    """Arbitrary logprobs of length n from a short drawn pattern (keeps examples small)."""
    return [pattern[i % len(pattern)] for i in range(n)]


def make_loop(
    kit: Any,
    tok: HFTokenizer,
    generations: list[Generation],
    template: Any = None,
    **limits: Any,
) -> Any:
    backend = kit.ScriptedTokenBackend(generations)
    model = TokenModel(backend, tok, template or tok.chat_template, kit.HermesTestParser())
    return AgentLoop(model, limits=LoopLimits(**limits)), backend


@pytest.mark.anyio
@fixture_ok
@given(turns=st.lists(turn_spec, min_size=1, max_size=4), final=plain_ids, final_lps=patterns)
async def test_trace_is_prompt_plus_generations_plus_bridges(
    kit: Any,
    hf_tokenizer: HFTokenizer,
    turns: list[Any],
    final: list[int],
    final_lps: list[float],
) -> None:
    tok = hf_tokenizer
    eos = tok.eos_token_id
    generations: list[Generation] = []
    results: list[list[str]] = []
    for noise, calls, pattern in turns:
        text = "\n".join(kit.call_text("echo", {"text": arg}) for arg, _ in calls)
        ids = [*noise, *tok.encode("\n" + text), eos]
        generations.append(Generation(ids, tiled(pattern, len(ids)), "stop"))
        results.append([answer for _, answer in calls])
    final_ids = [*final, eos]
    generations.append(Generation(final_ids, tiled(final_lps, len(final_ids)), "stop"))
    answers = iter(r for turn in results for r in turn)
    executor = kit.RecordingExecutor(lambda name, args: next(answers))
    loop, backend = make_loop(kit, tok, generations, max_turns=10)

    initial = [Message.user("hello world")]
    result = await loop.run(initial, tools=[kit.ECHO], executor=executor)

    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert result.turns == len(generations)
    prompt = tok.encode(
        tok.chat_template.render(initial, tools=[kit.ECHO], add_generation_prompt=True)
    )
    expected_ids, expected_mask, expected_lps = list(prompt), [0] * len(prompt), [0.0] * len(prompt)
    for index, generation in enumerate(generations):
        assert backend.prompts[index] == expected_ids  # the backend saw exactly the ledger
        expected_ids += generation.ids
        expected_mask += [1] * len(generation.ids)
        expected_lps += generation.logprobs
        if index < len(results):
            bridge = tok.encode(tool_bridge(results[index]))
            expected_ids += bridge
            expected_mask += [0] * len(bridge)
            expected_lps += [0.0] * len(bridge)
    trace = result.trace
    assert trace is not None
    assert trace.source == "sampler"
    assert list(trace.ids) == expected_ids
    assert list(trace.mask) == expected_mask
    assert list(trace.logprobs) == expected_lps
    assert [c[1]["text"] for c in executor.calls] == [a for _, calls, _ in turns for a, _ in calls]


@pytest.mark.anyio
@fixture_ok
@given(
    turns=st.lists(st.tuples(safe_text, st.lists(safe_text, min_size=1, max_size=2)), max_size=3),
    answer=safe_text,
    results=st.lists(safe_text, min_size=6, max_size=6),
)
@pytest.mark.parametrize("template_name", ["chatml-hermes-fallback", "qwen-like"])
async def test_drift_is_zero_for_canonical_tokens_and_prefix_preserving_template(
    kit: Any,
    hf_tokenizer: HFTokenizer,
    template_name: str,
    turns: list[Any],
    answer: str,
    results: list[str],
) -> None:
    tok = hf_tokenizer
    source = kit.CHATML if template_name == "chatml-hermes-fallback" else kit.QWEN_LIKE
    template = JinjaChatTemplate(source)
    generations = []
    for content, texts in turns:
        parts = ([content] if content else []) + [kit.call_text("echo", {"text": t}) for t in texts]
        ids = [*tok.encode("\n".join(parts)), tok.eos_token_id]
        generations.append(Generation(ids, [-0.1] * len(ids), "stop"))
    answer_ids = [*tok.encode(answer or "done"), tok.eos_token_id]
    generations.append(Generation(answer_ids, [-0.2] * len(answer_ids), "stop"))
    pool = iter(results * 2)
    loop, _ = make_loop(kit, tok, generations, template)
    result = await loop.run(
        [Message.system("Be brief."), Message.user("go")],
        tools=[kit.ECHO],
        executor=kit.RecordingExecutor(lambda name, args: next(pool)),
    )
    assert result.stop_reason == StopReason.FINAL_ANSWER
    assert result.drift is not None
    assert result.drift.mismatches == 0, result.drift
    assert result.drift.length_delta == 0


@pytest.mark.anyio
async def test_drift_reports_non_canonical_sampled_tokens(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    tok = hf_tokenizer
    word = "hello"
    canonical = tok.encode(word)
    spelled = [i for ch in word for i in tok.encode(ch)]  # same text, different ids
    assert canonical != spelled
    gen = Generation([*spelled, tok.eos_token_id], [-1.0] * (len(spelled) + 1), "stop")
    loop, _ = make_loop(kit, tok, [gen])
    result = await loop.run([Message.user("hi")], tools=[], executor=kit.RecordingExecutor())
    assert result.trace is not None
    assert list(result.trace.ids[-len(spelled) - 1 :]) == [*spelled, tok.eos_token_id]
    drift = result.drift
    # the same text spelled differently is inherent, never drift, and it does not shift the
    # comparison of the ids after it
    assert not drift.drifted
    assert (drift.mismatches, drift.positions) == (0, ())
    assert drift.noncanonical_tokens == len(spelled)
    assert drift.noncanonical_regions == 1
    assert drift.length_delta == len(canonical) - len(spelled)
    assert result.messages[-1] == Message.assistant("hello")


def test_real_drift_counts_the_differing_region_only(hf_tokenizer: HFTokenizer) -> None:
    tok = hf_tokenizer
    head = [i for ch in "hello" for i in tok.encode(ch)]  # non-canonical, same text
    actual = [*head, *tok.encode(" big world, said the model")]
    expected = [*tok.encode("hello"), *tok.encode(" small world, said the model")]
    drift = compare_ids(actual, expected, decode=tok.decode)
    assert drift.drifted
    assert drift.noncanonical_tokens == len(head)
    changed = max(len(tok.encode(" big")), len(tok.encode(" small")))
    assert 0 < drift.mismatches <= changed  # not every position after the re-spelled word
    positional = sum(a != b for a, b in zip(actual, expected, strict=False))
    assert positional > changed  # what a position-by-position count would have reported
    assert len(head) <= drift.positions[0] < len(head) + changed


def test_split_character_is_lossy_not_drift(hf_tokenizer: HFTokenizer) -> None:
    tok = hf_tokenizer
    ids = tok.encode("caf\u00e9 \U0001f600")
    for cut in range(1, len(ids)):
        cut_ids = ids[:cut]
        text = tok.decode(cut_ids)  # a generation cut by max_tokens inside a character
        if "\ufffd" in text and tok.encode(text) != cut_ids:
            break
    else:
        pytest.skip("the test vocabulary has no id ending inside a character")
    drift = compare_ids(cut_ids, tok.encode(text), decode=tok.decode)
    assert not drift.drifted
    assert drift.noncanonical_tokens == 0
    assert drift.lossy_tokens > 0
    # and a real change next to nothing lossy is still drift
    assert compare_ids(cut_ids, tok.encode("cafe"), decode=tok.decode).drifted


@settings(max_examples=60, deadline=None)
@given(text=safe_text, other=safe_text, cuts=st.lists(st.integers(0, 30), max_size=6))
def test_respelling_is_never_drift_and_changed_text_always_is(
    hf_tokenizer: HFTokenizer, text: str, other: str, cuts: list[int]
) -> None:
    tok = hf_tokenizer
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    spelled = [i for a, b in itertools.pairwise(bounds) for i in tok.encode(text[a:b])]
    assert tok.decode(spelled) == text
    canonical = tok.encode(text)
    same = compare_ids(spelled, canonical, decode=tok.decode)
    assert not same.drifted
    assert (same.noncanonical_tokens > 0) == (spelled != canonical)
    changed = compare_ids(spelled, tok.encode(other), decode=tok.decode)
    assert changed.drifted == (text != other)


def test_generation_without_eos_gets_the_turn_end_as_bridge(
    kit: Any, hf_tokenizer: HFTokenizer
) -> None:
    tok = hf_tokenizer
    ledger = TokenLedger(tok, tok.chat_template, [kit.ECHO])
    ledger.start([Message.user("x")])
    ids = tok.encode(kit.call_text("echo", {"text": "a"}))  # truncated: no <|im_end|> sampled
    ledger.add_generation(Generation(ids, [-1.0] * len(ids), "length"))
    bridge = ledger.add_messages([Message.tool("ok", "c1", "echo")])
    assert tok.decode(bridge) == "<|im_end|>" + tool_bridge(["ok"])
    assert ledger.mask[-len(bridge) :] == [0] * len(bridge)


def test_ledger_rejects_bridge_before_generation(kit: Any, hf_tokenizer: HFTokenizer) -> None:
    ledger = TokenLedger(hf_tokenizer, hf_tokenizer.chat_template)
    ledger.start([Message.user("x")])
    with pytest.raises(RuntimeError, match="follow a generation"):
        ledger.add_messages([Message.tool("ok", "c1")])


class OtherEos:
    """The test tokenizer, but with <|endoftext|> as its EOS (like many base-model configs)."""

    def __init__(self, inner: HFTokenizer) -> None:
        self.inner = inner

    @property
    def eos_token_id(self) -> int:
        return self.inner.encode("<|endoftext|>")[0]

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        return self.inner.encode(text, add_special_tokens=add_special_tokens)

    def decode(self, ids: Any) -> str:
        return self.inner.decode(ids)


@pytest.mark.parametrize(
    ("text", "finish", "expected_prefix"),
    [("hello<|im_end|>", "stop", ""), ("hello", "length", "<|im_end|>")],
)
def test_turn_end_token_other_than_eos(
    hf_tokenizer: HFTokenizer, text: str, finish: str, expected_prefix: str
) -> None:
    tok = OtherEos(hf_tokenizer)
    ledger = TokenLedger(tok, hf_tokenizer.chat_template)
    ledger.start([Message.user("x")])
    ids = tok.encode(text)
    ledger.add_generation(Generation(ids, [-1.0] * len(ids), finish))
    bridge = ledger.add_messages([Message.tool("ok", "c1")])
    assert tok.decode(bridge) == expected_prefix + tool_bridge(["ok"])


@pytest.fixture(scope="module")
def smollm2_tokenizer() -> GGUFTokenizer:
    return GGUFTokenizer.from_gguf(default_model_path())


@pytest.mark.slow
def test_smollm2_rollout_regions_are_classified(smollm2_tokenizer: GGUFTokenizer) -> None:
    """Regions seen in real SmolLM2-135M rollouts (temperature 1, max_tokens 64)."""
    tok = smollm2_tokenizer
    head, end = tok.encode("Use the tool"), [tok.eos_token_id, *tok.encode("\n")]
    # sampled "Ġ" + "×" (space, then the lead byte of a Hebrew letter) where the tokenizer
    # has one id "Ġ×": the text is the same once the continuation byte (an equal id) follows
    tail = tok.encode(" \u05de\u05d0")[1:]
    assert tok.decode([216, 162, *tail]) == tok.decode([12960, *tail]) == " \u05de\u05d0"
    split = compare_ids(
        [*head, 216, 162, *tail, *end], [*head, 12960, *tail, *end], decode=tok.decode
    )
    assert (split.drifted, split.noncanonical_tokens, split.lossy_tokens) == (False, 2, 0)
    # a flag emoji cut by max_tokens after three of its bytes: the message holds U+FFFD
    cut = [10813, 225]
    assert tok.decode(cut) == "\ufffd"
    assert tok.encode("\ufffd") != cut
    lossy = compare_ids(
        [*head, *cut, *end], [*head, *tok.encode("\ufffd"), *end], decode=tok.decode
    )
    assert (lossy.drifted, lossy.noncanonical_tokens, lossy.lossy_tokens) == (False, 0, 2)
