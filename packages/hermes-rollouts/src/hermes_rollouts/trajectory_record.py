"""One finished rollout as the JSON record ``trajectories.jsonl`` holds, and its encoding.

Every writer of trajectory records (the batch runner, ``hermes-envs check``) goes through
:func:`rollout_record` and :func:`encode_record`: records hold plain JSON only, and a value an
environment returned that is not (bytes in its setup metadata, a set in an item) is refused
with a :class:`RecordError` naming the environment and the key.

Fields: ``format_version`` (:data:`hermes_protocols.formats.TRAJECTORY_FORMAT`), ``id``,
``env``, ``item``, ``group_index``, ``messages`` (OpenAI chat JSON), ``conversations``
(ShareGPT ``from``/``value`` as hermes-agent writes them, the tool list in the system turn),
``tools`` (the OpenAI schemas the model was given), ``system_prompt`` (that system turn),
``tool_stats`` (calls/successes/failures per tool), ``toolsets_used``, ``prefill_messages``
(demonstration messages before the task; see :func:`hermes_rollouts.model_view`), ``reward``,
``metrics``, ``failure``, ``stop_reason``, ``tool_errors``, ``turns``, ``reasoning`` (per turn),
``timings``, ``model``, ``metadata``, and in token mode the token fields of
:func:`hermes_protocols.formats.token_fields` and ``drift``; ``sampling`` (sampling parameters,
the logprob mode requested and the one the engine returned, positions without a logprob).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from hermes_protocols import (
    AgentResult,
    HermesError,
    JSONObject,
    ScoredRollout,
    ToolCallError,
    TurnStats,
    json_problem,
)
from hermes_protocols.convert import messages_to_openai, record_converter
from hermes_protocols.formats import FORMAT_KEY, TRAJECTORY_FORMAT, token_fields

from hermes_rollouts.records import model_view

_CONVERTER = record_converter()


class RecordError(HermesError):
    """A record holds a value that is not plain JSON; the message names the environment and
    the key."""


def rollout_id(env: str, item_id: str, group_index: int) -> str:
    """The stable id of group member ``group_index`` of ``item_id`` (the runner's format)."""
    return f"{env}/{item_id}/{group_index}"


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _turn_timing(stats: TurnStats) -> JSONObject:
    return {
        "turn": stats.turn,
        "generation_s": stats.generation_s,
        "tools_s": stats.tools_s,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "tool_calls": stats.tool_calls,
        "finish_reason": stats.finish_reason,
    }


def _tool_error(error: ToolCallError) -> JSONObject:
    data: JSONObject = _CONVERTER.unstructure(error)
    return data


def _result_fields(result: AgentResult) -> JSONObject:
    out: JSONObject = {
        "messages": messages_to_openai(result.messages),
        "stop_reason": str(result.stop_reason),
        "turns": result.turns,
        "tool_errors": [_tool_error(e) for e in result.tool_errors],
        "reasoning": [s.reasoning for s in result.turn_stats],
        "turn_timings": [_turn_timing(s) for s in result.turn_stats],
        "completion_tokens": sum(s.completion_tokens for s in result.turn_stats),
        "prompt_tokens": sum(s.prompt_tokens for s in result.turn_stats),
        "error": result.error,
        "sampling": result.metadata.get("sampling"),
    }
    if result.trace is not None:
        out.update(token_fields(result.trace))
    if result.drift is not None:
        out["drift"] = {
            "mismatches": result.drift.mismatches,
            "length_delta": result.drift.length_delta,
            "positions": list(result.drift.positions),
            "noncanonical_tokens": result.drift.noncanonical_tokens,
            "lossy_tokens": result.drift.lossy_tokens,
        }
    return out


def rollout_record(rollout: ScoredRollout, *, record_id: str, model: str) -> JSONObject:
    """The JSON record of ``rollout`` under ``record_id``; strict JSON (no NaN)."""
    record: JSONObject = {
        FORMAT_KEY: TRAJECTORY_FORMAT,
        "id": record_id,
        "env": rollout.env,
        "item": {"id": rollout.item.id, "data": rollout.item.data, "split": rollout.item.split},
        "group_index": rollout.group_index,
        "model": model,
        "reward": None,
        "metrics": {},
        "failure": None,
        "messages": [],
        "conversations": [],
        "stop_reason": None,
        "turns": 0,
        "tool_errors": [],
        "reasoning": [],
    }
    record.update(model_view(rollout))
    if rollout.result is not None:
        record.update(_result_fields(rollout.result))
    if rollout.score is not None:
        record["reward"] = _finite(rollout.score.reward)
        record["metrics"] = {k: _finite(v) for k, v in rollout.score.metrics.items()}
        record["score_details"] = rollout.score.details
    if rollout.failure is not None:
        record["failure"] = {
            "kind": str(rollout.failure.kind),
            "phase": rollout.failure.phase,
            "message": rollout.failure.message,
            "attempts": rollout.failure.attempts,
        }
    timings: JSONObject = {k: _finite(v) for k, v in rollout.timings.items()}
    if "turn_timings" in record:
        timings["turns"] = record.pop("turn_timings")
    record["timings"] = timings
    record["metadata"] = dict(rollout.metadata)
    return record


def encode_record(record: Mapping[str, Any]) -> bytes:
    """One record as a single strict-JSON line (no NaN, no bytes); raises :class:`RecordError`
    naming the record's environment and the first key that is not plain JSON."""
    try:
        text = json.dumps(record, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        env = record.get("env")
        source = f"environment {env!r}" if isinstance(env, str) else "a record"
        problem = json_problem(record, "record") or str(exc)
        raise RecordError(
            f"{source} returned a value records cannot hold, {problem}: return plain JSON "
            "(str, numbers, bool, None, lists, dicts with str keys) from items, "
            "setup_workspace and verify, e.g. text or base64 instead of bytes"
        ) from exc
    return text.encode("utf-8") + b"\n"
