"""Token fidelity against a real llama-server at agent prompt lengths (issue 31).

The prompts are the apps' own: a system prompt, the shipped terminal demonstration and a task,
rendered with every built-in tool's schema (about 1,560 SmolLM2 tokens). Checked: a
teacher-forced recompute on a server started with the documented flags gives each generated
token's logprob, also for generations that queued concurrently; the embedded sampler's raw
logprobs are reproduced by such a server to 1e-3 nats; repeated byte tokens keep their
logprobs; a chat server that drops ``tools`` is noticed.
"""

from __future__ import annotations

import logging
import math
from importlib.metadata import version
from typing import Any

import anyio
import httpx
import pytest
from hermes_envs.prefill import demonstration_path, load_prefill
from hermes_loop import ChatModel, HFTokenizer, ModelSpec, TokenModel, open_model
from hermes_loop.engine import EXACT_LLAMA_SERVER_FLAGS
from hermes_parsers import get_parser
from hermes_protocols import Message, SamplingParams, ToolSchema
from hermes_sandbox.tools import resolve_tools

pytestmark = pytest.mark.anyio

TASKS = (
    "Write the word apple to fruit.txt.",
    "Count the files in the workspace and write the number to count.txt.",
)
#: tokens generated per prompt (each recompute prefills the whole prompt again, 23 s on one
#: thread here): the first (the prompt alone) and one after a generated token; a third position
#: recomputed the same way again and took 100 s of CI's tests
POSITIONS = 2
#: GBNF forcing "ကက ok": U+1000 is E1 80 80 in byte tokens, so the id of 0x80 sits at an
#: incomplete position (no entry) and a complete one (an entry)
REPEATED_BYTES_GRAMMAR = 'root ::= "ကက ok"'


def agent_prompt(server: Any, task: str) -> list[int]:
    """The ids of an agent prompt as the apps render it, with the terminal demonstration."""
    tokenizer = HFTokenizer.from_directory(server.tokenizer_dir)
    messages = [
        Message.system("You are a shell agent. Use the tools to change files."),
        *load_prefill(demonstration_path("terminal")),
        Message.user(task),
    ]
    tools = [tool.schema for tool in resolve_tools(["terminal", "file"])]
    text = tokenizer.chat_template.render(messages, tools=tools, add_generation_prompt=True)
    return tokenizer.encode(text)


async def complete(client: httpx.AsyncClient, ids: list[int], n: int) -> Any:
    """Greedy, raw logprobs, the prompt prefilled from scratch (no cached prefix)."""
    body = {
        "prompt": ids,
        "n_predict": n,
        "temperature": 0.0,
        "n_probs": 1,
        "post_sampling_probs": False,
        "return_tokens": True,
        "cache_prompt": False,
    }
    response = await client.post("/completion", json=body)
    response.raise_for_status()
    return response.json()


@pytest.mark.timeout(1800)  # 4 prefills of 1,560 tokens: ~1 min idle, 7 min on 2 busy cores
async def test_recompute_at_agent_prompt_length_equals_the_generation(
    exact_llama_server: Any, record_property: Any
) -> None:
    """docs/loop.md: with the documented flags a teacher-forced recompute of each position
    gives the generated token's logprob at a 1,500-token prompt (without ``-ctk q8_0 -ctv
    q8_0`` nearly every position was off, by up to 0.45 nats)."""
    assert " ".join(EXACT_LLAMA_SERVER_FLAGS) in " ".join(exact_llama_server.flags)
    prompts = [agent_prompt(exact_llama_server, task) for task in TASKS]
    assert min(len(ids) for ids in prompts) > 1000
    results: list[Any] = [None] * len(prompts)
    async with httpx.AsyncClient(base_url=exact_llama_server.url, timeout=1800) as client:

        async def run(index: int) -> None:
            results[index] = await complete(client, prompts[index], POSITIONS)

        async with anyio.create_task_group() as group:
            for index in range(len(prompts)):
                group.start_soon(run, index)
        differences = []
        for ids, result in zip(prompts, results, strict=True):
            tokens = result["tokens"]
            # from the second token on: the generation decoded it one id at a time after the
            # prefill, the recompute prefills it with the prompt (the first token's recompute
            # is the generation's own request again)
            for position, entry in enumerate(result["completion_probabilities"][1:], start=1):
                again = await complete(client, ids + tokens[:position], 1)
                (recomputed,) = again["completion_probabilities"]
                assert recomputed["id"] == entry["id"] == tokens[position]
                differences.append(abs(recomputed["logprob"] - entry["logprob"]))
    assert len(differences) == (POSITIONS - 1) * len(prompts)
    record_property("recompute_abs_differences", differences)
    assert max(differences) <= 1e-6, differences


@pytest.mark.timeout(1800)
async def test_the_embedded_samplers_logprobs_are_reproduced_by_the_documented_flags(
    exact_llama_server: Any, record_property: Any
) -> None:
    """A record's ``sampling.engine.reproduced_by``: a recompute on llama-server built from the
    same patched llama.cpp, with :data:`EXACT_LLAMA_SERVER_FLAGS`, gives the embedded model's
    raw logprobs at an agent prompt to 1e-3 nats (measured: at most 1.5e-4 over 12 positions
    on stock builds, 1.55e-4 on the patched ones; not bitwise: the two builds' arithmetic
    differs from the first position on; llama.cpp's defaults: up to 0.057 here; a stock server
    against the patched embedded library: 6.2e-3 at the first position, docs/embedded.md)."""
    from hermes_loop.embedded import EmbeddedModel

    ids = agent_prompt(exact_llama_server, TASKS[0])
    greedy = SamplingParams(temperature=0.0, max_tokens=POSITIONS, seed=1, logprob_mode="raw")
    async with await EmbeddedModel.open(n_ctx=4096, n_threads=1) as model:
        engine = model.token_model(get_parser("hermes")).engine
        generation = await model.backend.generate(ids, sampling=greedy)
    assert engine is not None
    assert " ".join(EXACT_LLAMA_SERVER_FLAGS) in str(engine["reproduced_by"])
    # the server (conftest: built by .ci/llama-server.sh from this version's patched tree)
    assert engine["llama_cpp_python"] == version("llama-cpp-python")
    generated = list(generation.ids)
    async with httpx.AsyncClient(base_url=exact_llama_server.url, timeout=1800) as client:
        differences = []
        for position, token in enumerate(generated):
            (entry,) = (await complete(client, ids + generated[:position], 1))[
                "completion_probabilities"
            ]
            assert entry["id"] == token
            differences.append(abs(entry["logprob"] - generation.logprobs[position]))
    record_property("embedded_abs_differences", differences)
    assert max(differences) <= 1e-3, differences


async def test_repeated_byte_tokens_keep_their_logprobs(llama_server: Any) -> None:
    """Every position after which the text ends at a character boundary has the server's
    logprob, also where the same byte token stands at an incomplete position before it."""
    spec = ModelSpec(
        server_type="llama_cpp",
        base_url=llama_server.url,
        tokenizer=str(llama_server.tokenizer_dir),
        extra_body={"grammar": REPEATED_BYTES_GRAMMAR},
        timeout_s=120,
    )
    tokenizer = HFTokenizer.from_directory(llama_server.tokenizer_dir)
    prompt = tokenizer.encode(
        tokenizer.chat_template.render([Message.user("Say ကက ok.")], add_generation_prompt=True)
    )
    async with open_model(spec, get_parser("hermes")) as handle:
        model = handle.model
        assert isinstance(model, TokenModel)
        sampling = SamplingParams(temperature=0.7, max_tokens=16, seed=3)
        generation = await model.backend.generate(prompt, sampling=sampling)
    ids = list(generation.ids)
    assert tokenizer.decode(ids).startswith("ကက ok")
    incomplete = [tokenizer.decode(ids[: p + 1]).endswith("\ufffd") for p in range(len(ids))]
    # the case at hand: one id both at an incomplete and at a complete position
    assert {ids[p] for p in range(len(ids)) if incomplete[p]} & {
        ids[p] for p in range(len(ids)) if not incomplete[p]
    }
    assert list(generation.missing_logprobs) == [p for p in range(len(ids)) if incomplete[p]]
    for position, value in enumerate(generation.logprobs):
        assert math.isnan(value) == incomplete[position]


async def test_a_chat_server_that_drops_tools_is_noticed(
    llama_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """SmolLM2's own template has no tools: llama-server (``--jinja``) drops them silently."""
    echo = ToolSchema(
        "echo",
        "Echo the text back.",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    )
    spec = ModelSpec(server_type="openai", base_url=f"{llama_server.url}/v1", model="smollm2")
    async with open_model(spec, get_parser("hermes")) as handle:
        model = handle.model
        assert isinstance(model, ChatModel)
        with caplog.at_level(logging.WARNING, logger="hermes_loop.ignored_tools"):
            assert await model.check_tools([echo]) is False
    (warning,) = [r.getMessage() for r in caplog.records if "drops `tools`" in r.getMessage()]
    assert "--jinja" in warning
