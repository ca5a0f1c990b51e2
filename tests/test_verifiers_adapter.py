"""The verifiers adapter (apps/verifiers_env) for real: ``vf-eval`` of our environments in
verifiers' own venv (``.ci/verifiers.sh``) against a real llama-server whose chat template
renders tools, rollouts in bwrap slots. The rewards in verifiers' results are our verifier's
(each rollout's commands, replayed on a fresh slot of the same item, score the same), an
infrastructure failure is an errored rollout (never a 0.0 reward), and no slot is left behind."""

from __future__ import annotations

import json
import re
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import hermes_parsers
import psutil
import pytest
from hermes_envs import RolloutRunner, RunnerConfig, ScriptAgent
from hermes_protocols import Item
from hermes_rollouts import (
    COMMAND_TIMEOUT,
    MAX_TOKENS,
    MAX_TURNS,
    PARSER,
    SANDBOX,
    SEED,
    EnvironmentSpec,
    build_environment,
)
from hermes_sandbox import PoolConfig, SandboxPool
from hermes_sandbox.factory import SandboxSpec, build_backend, build_toolsets

from tests.user_command import UserCommand, traversable_tmp

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = Path.home() / ".cache/hermes-rl/verifiers-0.4.0/venv/bin/python"
LAUNCHER = ROOT / "apps/verifiers_env/vf_eval.py"
BROKEN = ROOT / "tests/broken_setup.py"
DOC = ROOT / "docs/verifiers.md"
SALES_REPORT = ROOT / "examples/sales_report/src/hermes_sales_report/__init__.py"
WRITE_WORD = json.dumps({"families": ["write_word"], "difficulties": [1]})
#: how long vf-eval may take to clean up and exit after a signal (measured: 17-35 s for the
#: whole test, start included)
EXIT_S = 30

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def user_tmp() -> Iterator[Path]:
    yield from traversable_tmp()


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variable ``--client.api-key-var`` names (llama-server checks no key)."""
    monkeypatch.setenv("HERMES_VF_KEY", "unused")


def vf_eval(cwd: Path, tmp: Path, args: list[str]) -> UserCommand:
    """Start ``vf-eval`` as a user does (its own process group, bwrap hosts under ``tmp``)."""
    if not VENV_PYTHON.is_file():
        pytest.skip(f"verifiers is not installed at {VENV_PYTHON}: run .ci/verifiers.sh")
    return UserCommand(str(VENV_PYTHON), [str(LAUNCHER), *args], cwd=cwd, tmp=tmp)


def common(server: Any, out: Path) -> list[str]:
    """The options every test run shares: the server, the output, no platform upload."""
    return [
        *("-m", "smollm2", "--client.base-url", f"{server.url}/v1"),
        *("--client.api-key-var", "HERMES_VF_KEY", "-o", str(out), "--run.dir", "run"),
        *("--no-push", "--no-rich", "--env.agent.runtime.type", "subprocess"),
        *("--env.agent.harness.id", "hermes-verifiers-env"),
        *("--env.agent.harness.context-tokens", "2048"),
    ]


def traces(path: Path) -> list[dict[str, Any]]:
    """Every rollout's trace in verifiers' results (one episode per line)."""
    lines = path.read_text().splitlines()
    return [trace for line in lines if line.strip() for trace in json.loads(line)["traces"]]


def arguments(call: dict[str, Any]) -> dict[str, Any]:
    """A server tool call's arguments; none for arguments that are not a JSON object (the
    loop answers such a call with an invalid-arguments error and runs nothing, e.g. a call cut
    off by the turn's token budget)."""
    try:
        decoded = json.loads(call["arguments"])
    except json.JSONDecodeError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def commands(trace: dict[str, Any]) -> list[str]:
    """The terminal commands the model called, in order: the server's tool calls, else those
    our harness parsed from the content (``parse_content_tool_calls``)."""
    parser = hermes_parsers.get_parser("hermes")
    found: list[str] = []
    for node in trace["nodes"]:
        message = node["message"]
        if message["role"] != "assistant" or not node["sampled"]:
            continue
        calls = [(c["name"], arguments(c)) for c in message.get("tool_calls") or []]
        if not calls:
            parsed = parser.parse(message.get("content") or "").tool_calls
            calls = [(c.name, c.arguments or {}) for c in parsed]
        found += [
            str(args["command"]) for name, args in calls if name == "terminal" and "command" in args
        ]
    return found


async def replayed_rewards(
    environment: str, options: dict[str, Any], runs: list[tuple[Item, str]]
) -> list[float]:
    """Our verifier's reward for each ``(item, script)``: the script run on a fresh bwrap slot
    of the item (one pool for all of them)."""
    env = build_environment(EnvironmentSpec(name=environment, options=options))
    backend = build_backend(SandboxSpec(kind="bwrap"))
    terminal = [t for t in build_toolsets(30.0, 600.0) if t.name == "terminal"]
    rewards: list[float] = []
    async with SandboxPool(backend, PoolConfig(name="vf-replay", max_hosts=1)) as pool:
        for item, script in runs:
            agent = ScriptAgent(script or "true")
            runner = RolloutRunner(env, pool, agent, terminal, config=RunnerConfig(max_attempts=1))
            rollout = await runner.run_rollout(item, terminal)
            assert rollout.score is not None, rollout.failure
            rewards.append(rollout.score.reward)
    return rewards


def doc_blocks() -> list[str]:
    """docs/verifiers.md's bash blocks: the server's, then the vf-eval run's."""
    return re.findall(r"```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def doc_server(server: Any) -> list[str]:
    """The llama-server line docs/verifiers.md shows for ``server``: its GGUF, its flags."""
    flags = [str(Path(f).relative_to(ROOT)) if f.startswith(str(ROOT)) else f for f in server.flags]
    return ["llama-server", "-m", server.gguf.name, "--port", "8080", *flags]


def doc_command(url: str, out: Path) -> list[str]:
    """docs/verifiers.md's vf-eval line, its server and output directory replaced."""
    block = doc_blocks()[1]
    line = block.splitlines()[1]
    assert line.startswith("~/.cache/hermes-rl/verifiers-0.4.0/venv/bin/python "), line
    line = line.replace("http://127.0.0.1:8080", url).replace("~/runs/vf", str(out))
    return shlex.split(line)[2:]  # after the venv's python and the launcher


def test_the_docs_vf_eval_rewards_are_our_verifiers(
    tools_llama_server: Any, tmp_path: Path, user_tmp: Path, key: None
) -> None:
    (server_line,) = doc_blocks()[0].splitlines()
    assert shlex.split(server_line) == doc_server(tools_llama_server)
    command = vf_eval(tmp_path, user_tmp, doc_command(tools_llama_server.url, tmp_path / "out"))
    results = tmp_path / "out" / "write_word" / "traces.jsonl"
    assert command.wait(timeout=900) == 0, command.output[-4000:]
    assert command.leftovers() == []
    found = traces(results)
    assert len(found) == 6
    runs: list[tuple[Item, str]] = []
    for trace in found:
        assert trace["ok"], trace.get("errors")
        assert trace["rewards"]["hermes_reward"]["score"] in (0.0, 1.0)
        runs.append((Item(**trace["task"]["data"]["item"]), "\n".join(commands(trace))))
    assert any(script for _, script in runs), "the model called no tool in any rollout"
    data = found[0]["task"]["data"]
    replays = anyio.run(replayed_rewards, data["environment"], data["options"], runs)
    assert replays == [t["rewards"]["hermes_reward"]["score"] for t in found], runs


def test_vf_eval_runs_the_example_plugin_from_a_file(
    tools_llama_server: Any, tmp_path: Path, user_tmp: Path, key: None
) -> None:
    args = [
        "hermes-verifiers-env", "-n", "1", "-r", "2",
        *("--env.taskset.environment", f"{SALES_REPORT}:SalesReportEnv"),
        *("--env.agent.harness.demonstration", "terminal"),
        *("--env.agent.harness.toolsets", "terminal"),
        *("--env.agent.harness.max-turns", "1", "--env.agent.harness.max-tokens", "48"),
        *common(tools_llama_server, tmp_path / "out"),
    ]  # fmt: skip
    command = vf_eval(tmp_path, user_tmp, args)
    results = tmp_path / "out" / "run" / "traces.jsonl"
    assert command.wait(timeout=900) == 0, command.output[-4000:]
    assert command.leftovers() == []
    found = traces(results)
    assert len(found) == 2
    for trace in found:
        assert trace["ok"], trace.get("errors")
        assert trace["task"]["data"]["item"]["id"].startswith("sales")
        assert trace["rewards"]["hermes_reward"]["score"] in (0.0, 1.0)


def test_infrastructure_failure_is_an_errored_rollout_not_a_zero(
    tools_llama_server: Any, tmp_path: Path, user_tmp: Path, key: None
) -> None:
    args = [
        "hermes-verifiers-env", "-n", "1", "-r", "1",
        *("--env.taskset.environment", f"{BROKEN}:BrokenSetup"),
        *("--env.agent.harness.max-attempts", "2"),
        *common(tools_llama_server, tmp_path / "out"),
    ]  # fmt: skip
    command = vf_eval(tmp_path, user_tmp, args)
    results = tmp_path / "out" / "run" / "traces.jsonl"
    command.wait(timeout=600)
    assert command.leftovers() == []
    (trace,) = traces(results)
    assert not trace["ok"]
    assert "hermes_reward" not in trace["rewards"]
    assert any("the host went away" in e["message"] for e in trace["errors"]), trace["errors"]
    assert trace["errors"][-1]["type"] == "SandboxError"
    # the options it left alone took the shared defaults (hermes_rollouts.option_defaults)
    resolved = json.loads((tmp_path / "out/run/configs/resolved/eval.json").read_text())
    harness, taskset = resolved["env"]["agent"]["harness"], resolved["env"]["taskset"]
    assert (harness["sandbox"], harness["parser"]) == (SANDBOX.value, PARSER.value)
    assert (harness["max_turns"], harness["max_tokens"]) == (MAX_TURNS.value, MAX_TOKENS.value)
    assert harness["command_timeout"] == COMMAND_TIMEOUT.value
    assert taskset["seed"] == SEED.value


def test_vf_eval_stopped_mid_rollout_exits_and_leaves_no_sandbox(
    tools_llama_server: Any, tmp_path: Path, user_tmp: Path, key: None
) -> None:
    """SIGTERM (verifiers handles SIGINT the same way: a ``KeyboardInterrupt``, then each
    rollout's cleanup) once a rollout holds a slot: vf-eval exits and nothing of the sandboxes
    is left (hermes_verifiers_env.own_loop says why that needs a loop of our own)."""
    args = [
        "hermes-verifiers-env", "-n", "2", "-r", "2",
        *("--env.taskset.options", WRITE_WORD),
        *("--env.agent.harness.max-turns", "3", "--env.agent.harness.max-tokens", "64"),
        *common(tools_llama_server, tmp_path / "out"),
    ]  # fmt: skip
    command = vf_eval(tmp_path, user_tmp, args)

    def a_rollout_holds_a_slot() -> bool:
        hosts = [h for root in user_tmp.glob("hermes-sandbox-*/bwrap") for h in root.iterdir()]
        return any(not h.name.startswith(".") for h in hosts)

    command.wait_for(a_rollout_holds_a_slot, timeout=300, what="a rollout held a slot")
    # to vf-eval's Python, as `kill` of the documented command does (uv, in between here,
    # would forward a SIGTERM a second time)
    [vf_eval_python] = psutil.Process(command.process.pid).children()
    vf_eval_python.send_signal(signal.SIGTERM)
    assert command.wait(timeout=EXIT_S) != 0, command.output[-4000:]
    assert command.leftovers(settle_s=10) == []
