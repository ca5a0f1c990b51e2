"""One finished rollout as the JSON object ``trajectories.jsonl`` holds.

Fields: ``id``, ``env``, ``item``, ``group_index``, ``messages`` (OpenAI chat JSON),
``conversations`` (ShareGPT ``from``/``value`` as hermes-agent writes them, the tool list in the
system turn), ``tools`` (the OpenAI schemas the model was given), ``system_prompt`` (that
system turn), ``tool_stats`` (calls/successes/failures per tool), ``toolsets_used``,
``prefill_messages`` (demonstration messages before the task; see
:func:`hermes_rollouts.model_view`), ``reward``,
``metrics``, ``failure``, ``stop_reason``, ``tool_errors``, ``turns``, ``reasoning`` (per turn),
``timings``, ``model``, ``metadata``, and in token mode ``tokens``, ``masks``, ``logprobs``,
``token_source``, ``logprob_mode`` and ``drift``; ``sampling`` (sampling parameters, the
logprob mode requested and the one the engine returned, positions without a logprob).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from hermes_protocols import (
    AgentResult,
    JSONObject,
    ScoredRollout,
    ToolCallError,
    TurnStats,
)
from hermes_protocols.convert import messages_to_openai, record_converter
from hermes_rollouts import model_view

_CONVERTER = record_converter()


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
        out["tokens"] = list(result.trace.ids)
        out["masks"] = list(result.trace.mask)
        out["logprobs"] = [_finite(v) for v in result.trace.logprobs]
        out["token_source"] = result.trace.source
        out["logprob_mode"] = result.trace.logprob_mode
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


def has_reasoning(record: Mapping[str, Any]) -> bool:
    """Whether any assistant turn of the record carries non-empty reasoning."""
    reasoning = record.get("reasoning") or []
    if any(isinstance(r, str) and r.strip() for r in reasoning):
        return True
    return any(
        isinstance(m, dict) and m.get("role") == "assistant" and m.get("reasoning_content")
        for m in record.get("messages") or []
    )
