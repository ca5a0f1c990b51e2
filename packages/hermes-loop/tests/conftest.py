"""Shared fixtures: a real byte-level BPE tokenizer saved as an HF directory, a ChatML template,
a minimal Hermes-format tool-call parser, scripted backends and executors."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import uvicorn
from hermes_loop import HFTokenizer
from hermes_loop.embedded.runtime import STEP_IDS
from hermes_protocols import (
    BackendError,
    ChatChoice,
    ChatResult,
    Generation,
    JSONObject,
    Message,
    ParsedToolCall,
    ParsedTurn,
    SamplingParams,
    ToolParseError,
    ToolResult,
    ToolSchema,
    Usage,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

CHATML = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# A tool-aware ChatML template in the style of Qwen2.5 (written for these tests): tools in the
# system prompt, tool calls as <tool_call> blocks, consecutive tool results grouped in one user
# turn as <tool_response> blocks.
QWEN_LIKE = (
    "{%- if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}{% else %}You are helpful."
    "{% endif %}{{ '\n\n# Tools\n<tools>' }}"
    "{% for tool in tools %}{{ '\n' }}{{ tool | tojson }}{% endfor %}"
    "{{ '\n</tools><|im_end|>\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{ '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{ '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{ '<|im_start|>assistant' }}"
    "{%- if message.content %}{{ '\n' + message.content }}{% endif %}"
    "{%- for tc in message.tool_calls or [] %}"
    '{{ \'\n<tool_call>\n{"name": "\' + tc.function.name + \'", "arguments": \' }}'
    "{{- tc.function.arguments | tojson }}{{ '}\n</tool_call>' }}"
    "{%- endfor %}{{ '<|im_end|>\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}"
    "{{ '<|im_start|>user' }}{% endif %}"
    "{{ '\n<tool_response>\n' + message.content + '\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{ '<|im_end|>\n' }}"
    "{% endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
    "<tool_response>\n3\n</tool_response>",
    "You are a function calling AI model. Here are the available tools: <tools> </tools>",
    "system user assistant tool hello world answer result error",
    "0123456789 {}[]:,\"' abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ",
]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tokenizer_dir(path: Path, chat_template: str = CHATML) -> Path:
    """Train a tiny byte-level BPE and save it as a transformers tokenizer directory."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": chat_template,
        "model_max_length": 32768,
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="session")
def hf_tokenizer(tokenizer_dir: Path) -> HFTokenizer:
    return HFTokenizer.from_directory(tokenizer_dir)


_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class HermesTestParser:
    """Minimal Hermes-format parser for tests: ``<tool_call>{json}</tool_call>`` blocks."""

    name = "hermes-test"

    def parse(self, text: str, *, tools: Sequence[Mapping[str, Any]] | None = None) -> ParsedTurn:
        calls: list[ParsedToolCall] = []
        errors: list[ToolParseError] = []
        for index, match in enumerate(_CALL.finditer(text)):
            raw = match.group(1)
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                errors.append(
                    ToolParseError("invalid_json", str(exc), index, match.start(), match.end())
                )
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                errors.append(
                    ToolParseError("missing_name", "no name", index, match.start(), match.end())
                )
                continue
            args = obj.get("arguments", {})
            raw_args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            parsed = args if isinstance(args, dict) else None
            calls.append(ParsedToolCall(name=obj["name"], arguments=parsed, raw_arguments=raw_args))
        first = text.find("<tool_call>")
        content = text if first < 0 else text[:first].rstrip("\n")
        return ParsedTurn(content=content or None, tool_calls=calls, errors=errors)

    def render(
        self,
        *,
        content: str | None = None,
        tool_calls: Sequence[ParsedToolCall] = (),
        reasoning: str | None = None,
    ) -> str:
        parts = [content] if content else []
        for call in tool_calls:
            body = json.dumps(
                {"name": call.name, "arguments": json.loads(call.raw_arguments)},
                ensure_ascii=False,
            )
            parts.append(f"<tool_call>\n{body}\n</tool_call>")
        return "\n".join(parts)

    def stream(self, *, tools: Sequence[Mapping[str, Any]] | None = None) -> Any:
        raise NotImplementedError("the test parser does not stream")


@pytest.fixture
def parser() -> HermesTestParser:
    return HermesTestParser()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def chatml() -> str:
    return CHATML


ECHO = ToolSchema(
    name="echo",
    description="Echo a text",
    parameters={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    },
)


def call_text(name: str, arguments: JSONObject) -> str:
    """A tool call exactly as a Hermes model emits it (and the fallback template renders it)."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


class ScriptedTokenBackend:
    """Returns scripted generations in order and records every prompt it was sent.

    ``block`` makes a turn (1-based) wait forever, to test timeouts and cancellation.
    """

    def __init__(self, generations: Sequence[Generation], *, block: int | None = None) -> None:
        self.generations = list(generations)
        self.prompts: list[list[int]] = []
        self.sampling: list[SamplingParams] = []
        self.block = block

    async def generate(self, prompt_ids: Sequence[int], *, sampling: SamplingParams) -> Generation:
        self.prompts.append(list(prompt_ids))
        self.sampling.append(sampling)
        if self.block == len(self.prompts):
            await anyio.sleep_forever()
        if len(self.prompts) > len(self.generations):
            raise BackendError("script exhausted: the server went away")
        return self.generations[len(self.prompts) - 1]


class ScriptedChatBackend:
    """Returns scripted assistant messages in order; records the conversations it was sent."""

    def __init__(self, replies: Sequence[Message], *, block: int | None = None) -> None:
        self.replies = list(replies)
        self.requests: list[list[Message]] = []
        self.block = block
        self.blocked = anyio.Event()

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSchema],
        sampling: SamplingParams,
        n: int = 1,
        extra_body: JSONObject | None = None,
    ) -> ChatResult:
        self.requests.append(list(messages))
        if self.block == len(self.requests):
            self.blocked.set()
            await anyio.sleep_forever()
        if len(self.requests) > len(self.replies):
            raise BackendError("script exhausted: the server went away")
        reply = self.replies[len(self.requests) - 1]
        finish = "tool_calls" if reply.tool_calls else "stop"
        return ChatResult(
            choices=[ChatChoice(reply, finish)],
            usage=Usage(prompt_tokens=10 * len(messages), completion_tokens=5),
        )


class RecordingExecutor:
    """Records every call it receives; answers with ``respond(name, arguments)``."""

    def __init__(
        self,
        respond: Callable[[str, Mapping[str, Any]], str] | None = None,
        *,
        delay: float = 0.0,
    ) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.respond = respond or (lambda name, args: f"{name}:{json.dumps(dict(args))}")
        self.delay = delay

    async def __call__(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        self.calls.append((name, dict(arguments)))
        if self.delay:
            await anyio.sleep(self.delay)
        return ToolResult(content=self.respond(name, arguments))


Reply = Callable[[dict[str, Any]], Response]


class ScriptedHTTPServer:
    """A starlette app answering one POST path with scripted replies, recording request JSON.

    Replies are callables ``request_json -> Response``; the last one repeats when the script
    runs out. ``json_reply``, ``error_reply``, ``drop_reply``, ``raw_reply`` and ``slow_reply``
    build common ones.
    """

    def __init__(self, path: str, replies: Sequence[Reply]) -> None:
        self.path = path
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.app = Starlette(routes=[Route(path, self._handle, methods=["POST"])])

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        return reply(body)


def json_reply(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    return lambda _body: JSONResponse(data, status_code=status, headers=dict(headers or {}))


def error_reply(status: int, message: str, headers: Mapping[str, str] | None = None) -> Reply:
    return json_reply({"error": {"message": message, "code": status}}, status, headers)


def raw_reply(text: str) -> Reply:
    return lambda _body: Response(text, media_type="application/json")


def drop_reply(data: Any) -> Reply:
    """Declares the full length, sends half the body, then the connection is closed."""
    payload = json.dumps(data).encode()

    async def half() -> AsyncIterator[bytes]:
        yield payload[: len(payload) // 2]

    return lambda _body: StreamingResponse(
        half(), media_type="application/json", headers={"content-length": str(len(payload))}
    )


def slow_reply(seconds: float, data: Any) -> Reply:
    async def body() -> AsyncIterator[bytes]:
        await anyio.sleep(seconds)
        yield json.dumps(data).encode()

    return lambda _body: StreamingResponse(body(), media_type="application/json")


@asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn on a free 127.0.0.1 port; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [sock])
        with anyio.fail_after(10):
            while not server.started:  # noqa: ASYNC110 - uvicorn exposes no started event
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
    sock.close()


def free_port() -> int:
    """A port nothing listens on (bound then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class ScriptedRuntime:
    """Stands in for the embedded ``LlamaRuntime`` (one sequence): each logits row asked for
    gets logits whose argmax is the next id of ``script`` (after ``delay_s``); ``eog_ids`` are
    the declared end-of-generation ids."""

    def __init__(
        self,
        script: Sequence[int],
        eog_ids: set[int],
        n_vocab: int = 400,
        *,
        delay_s: float = 0.0,
    ) -> None:
        self.script = list(script)
        self.delay_s = delay_s
        self.started = threading.Event()
        self.closed = False
        self.eog_ids = frozenset(eog_ids)
        self.n_vocab = n_vocab
        self.n_ctx = 4096
        self.n_seq = 1
        self.step_ids = STEP_IDS
        self.n_threads = 1
        self._tokens: list[int] = []
        self._rows: dict[int, Any] = {}

    @property
    def n_cached(self) -> int:
        return len(self._tokens)

    def seq_len(self, seq: int) -> int:
        return len(self._tokens)

    def common_prefix(self, ids: Sequence[int], seq: int = 0) -> int:
        n = 0
        for a, b in zip(self._tokens, ids, strict=False):
            if a != b:
                break
            n += 1
        return n

    def truncate(self, keep: int, seq: int = 0) -> None:
        del self._tokens[keep:]

    def decode(self, entries: Sequence[tuple[int, Sequence[int], bool]]) -> list[int]:
        self.started.set()
        if self.delay_s:
            time.sleep(self.delay_s)  # a worker thread: stands for llama_decode's compute
        rows = []
        for index, (_seq, ids, want) in enumerate(entries):
            self._tokens.extend(ids)
            if want:
                logits = np.zeros(self.n_vocab, dtype=np.float32)
                logits[self.script.pop(0)] = 12.0
                self._rows[index] = logits
            rows.append(index if want else -1)
        return rows

    def logits(self, row: int) -> Any:
        return self._rows[row]

    def piece(self, token: int) -> bytes:
        return b"x"

    def close(self) -> None:
        self.closed = True


class Kit:
    """Test helpers handed to tests through the ``kit`` fixture (tests cannot import conftest)."""

    CHATML = CHATML
    QWEN_LIKE = QWEN_LIKE
    ECHO = ECHO
    call_text = staticmethod(call_text)
    build_tokenizer_dir = staticmethod(build_tokenizer_dir)
    ScriptedTokenBackend = ScriptedTokenBackend
    ScriptedChatBackend = ScriptedChatBackend
    RecordingExecutor = RecordingExecutor
    ScriptedRuntime = ScriptedRuntime
    HermesTestParser = HermesTestParser
    ScriptedHTTPServer = ScriptedHTTPServer
    json_reply = staticmethod(json_reply)
    error_reply = staticmethod(error_reply)
    raw_reply = staticmethod(raw_reply)
    drop_reply = staticmethod(drop_reply)
    slow_reply = staticmethod(slow_reply)
    serve = staticmethod(serve)
    free_port = staticmethod(free_port)


@pytest.fixture(scope="session")
def kit() -> type[Kit]:
    return Kit
