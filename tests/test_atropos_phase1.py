"""Phase 1 end to end: `process --openai.server_type openai` against an OpenAI-compatible chat
server on 127.0.0.1 (a scripted one: it calls the terminal tool once, then answers). The groups
carry re-tokenized ids marked as such, no logprobs, and the real tool result from bwrap."""

from __future__ import annotations

import json
import socket
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from hermes_atropos_env.trainer import batch_problems
from hermes_protocols.formats import ATROPOS_MASKED as MASKED

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "apps" / "atropos_env"

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.anyio]

SERVER = textwrap.dedent(
    """
    import json, sys
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    LOG = sys.argv[2]

    async def chat(request):
        body = await request.json()
        with open(LOG, "a") as f:
            f.write(json.dumps(body) + "\\n")
        last = body["messages"][-1]
        if last["role"] == "tool":
            message = {"role": "assistant", "content": "Listed the files."}
            finish = "stop"
        else:
            arguments = json.dumps({"command": "echo hi-from-bwrap"})
            call = {"id": "call_1", "type": "function",
                    "function": {"name": "terminal", "arguments": arguments}}
            message = {"role": "assistant", "content": None, "tool_calls": [call],
                       "reasoning_content": "I will look first."}
            finish = "tool_calls"
        return JSONResponse({"id": "x", "object": "chat.completion", "model": body["model"],
                             "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 5}})

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
    """
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.timeout(600)
async def test_phase1_process_marks_retokenized_groups(tmp_path: Path) -> None:
    from hermes_loop import HFTokenizer
    from hermes_loop.embedded.hf_export import export_hf_tokenizer
    from hermes_loop.embedded.model_file import resolve_model_path

    tokenizer_dir = export_hf_tokenizer(resolve_model_path(None), tmp_path / "tok")
    port, requests = _free_port(), tmp_path / "requests.jsonl"
    (tmp_path / "server.py").write_text(SERVER)
    out = tmp_path / "groups.jsonl"
    cmd = [
        sys.executable, str(APP), "process",
        "--env.environment", "endless_terminals",
        "--env.tool_pool_mode", "bwrap",
        "--env.total_steps", "1",
        "--env.group_size", "2",
        "--env.max_agent_turns", "3",
        "--env.enabled_toolsets", "terminal",
        "--env.use_wandb", "false",
        "--env.extra_body", '{"provider": {"order": ["local"]}}',
        "--env.data_path_to_save_groups", str(out),
        "--openai.server_type", "openai",
        "--openai.base_url", f"http://127.0.0.1:{port}/v1",
        "--openai.model_name", "scripted",
        "--openai.tokenizer_name", str(tokenizer_dir),
    ]  # fmt: skip
    async with await anyio.open_process(
        [sys.executable, str(tmp_path / "server.py"), str(port), str(requests)]
    ) as server:
        try:
            with anyio.fail_after(500):
                done = await anyio.run_process(cmd, cwd=tmp_path, check=False)
        finally:
            server.terminate()
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    (group,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert group["group_overrides"]["token_source"] == "retokenized"
    assert group["generation_params"]["token_source"] == "retokenized"
    assert group["inference_logprobs"] is None
    assert batch_problems([group]) == []
    tokenizer = HFTokenizer.from_directory(tokenizer_dir)
    for ids, mask, messages in zip(group["tokens"], group["masks"], group["messages"], strict=True):
        trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m != MASKED])
        assert "Listed the files." in trained
        assert "hi-from-bwrap" in trained  # the tool call the model emitted
        assert messages[0]["role"] == "system"
        assert messages[0]["content"] not in trained
        tool_results = [m["content"] for m in messages if m["role"] == "tool"]
        assert len(tool_results) == 1
        assert "hi-from-bwrap" in tool_results[0]
        assert messages[-1]["content"] == "Listed the files."
    preflight, offered, bare, *bodies = [
        json.loads(line) for line in requests.read_text().splitlines()
    ]
    # the start-up checks: the model answers before rollouts, and the tools reach the prompt
    assert preflight["max_tokens"] == offered["max_tokens"] == bare["max_tokens"] == 1
    assert [t["function"]["name"] for t in offered["tools"]] == ["terminal"]
    assert not bare.get("tools")
    assert len(bodies) == 4
    assert all(b["provider"] == {"order": ["local"]} for b in bodies)
    assert all([t["function"]["name"] for t in b["tools"]] == ["terminal"] for b in bodies)
