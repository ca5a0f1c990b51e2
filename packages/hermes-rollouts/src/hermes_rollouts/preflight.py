"""Start-up checks run before any rollout: a sandbox host starts and runs a command, and the
model answers one tiny request (a chat server also with the run's tools, warning once when it
drops them). A failure is a :class:`PreflightError` (one line naming the option to change); no
rollout has started, so nothing is recorded as failed."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
from hermes_loop import ChatModel, ModelHandle
from hermes_protocols import (
    HermesError,
    ImageUnavailable,
    Message,
    SamplingParams,
    SlotPool,
    ToolSchema,
)

from hermes_rollouts.option_names import OptionNames
from hermes_rollouts.spec import RolloutSpec

#: seconds the preflight command may take once a host is up
COMMAND_TIMEOUT_S = 60.0
PREFLIGHT_MARKER = "hermes-preflight-ok"


class PreflightError(HermesError):
    """The sandbox backend or the model does not work; the message says which and what to
    change."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def host_start_failed(exc: BaseException, spec: RolloutSpec, names: OptionNames) -> PreflightError:
    """The error for a pool that could not start a host (at start-up or first acquire); an
    image the backend cannot have names the image option."""
    fix = (
        f"set {names('sandbox.image')} to an image this host has"
        if isinstance(exc, ImageUnavailable)
        else "fix it"
    )
    return PreflightError(
        f"the {spec.sandbox.kind} sandbox cannot start a host ({_one_line(exc)}); {fix} or "
        f"choose another {names('sandbox.kind')}"
    )


async def check_sandbox(pool: SlotPool, spec: RolloutSpec, names: OptionNames) -> None:
    """Acquire a slot, run ``echo`` in it and release it; raise :class:`PreflightError`."""
    kind = spec.sandbox.kind
    hint = f"fix it or choose another {names('sandbox.kind')}"
    try:
        slot = await pool.acquire("preflight", timeout=spec.pool.acquire_timeout_s)
    except HermesError as exc:
        raise host_start_failed(exc, spec, names) from exc
    try:
        result = await slot.exec(f"echo {PREFLIGHT_MARKER}", timeout=COMMAND_TIMEOUT_S)
    except HermesError as exc:
        raise PreflightError(
            f"the {kind} sandbox started a host but cannot run a command ({_one_line(exc)}); {hint}"
        ) from exc
    finally:
        with anyio.CancelScope(shield=True):
            await pool.release(slot)
    if result.exit_code != 0 or PREFLIGHT_MARKER not in result.stdout:
        raise PreflightError(
            f"the {kind} sandbox ran `echo` with exit code {result.exit_code} "
            f"(stderr: {result.stderr.strip()[:200]!r}); {hint}"
        )


async def check_model(handle: ModelHandle, spec: RolloutSpec, names: OptionNames) -> None:
    """Ask the model for one token; raise :class:`PreflightError` when it does not answer
    within ``ModelSpec.timeout_s``."""
    where = spec.model.base_url or "the embedded model"
    hint = (
        f"check {names('model.base_url')} and {names('model.model')}"
        if spec.model.base_url
        else f"check {names('model.gguf_path')}"
    )
    sampling = SamplingParams(temperature=0.0, max_tokens=1, seed=0)
    try:
        with anyio.fail_after(spec.model.timeout_s):
            session = handle.model.open([Message.user("Say OK.")], [], sampling)
            await session.start()
            await session.generate(1, 1)
    except TimeoutError as exc:
        raise PreflightError(
            f"{where} did not answer a 1-token request within {spec.model.timeout_s:g}s; {hint}"
        ) from exc
    except HermesError as exc:
        raise PreflightError(
            f"{where} failed a 1-token request ({_one_line(exc)}); {hint}"
        ) from exc


async def check_tools(
    handle: ModelHandle, tools: Sequence[ToolSchema], spec: RolloutSpec, names: OptionNames
) -> None:
    """Phase 1: warn once when the chat server drops ``tools`` from the prompt
    (:meth:`hermes_loop.ChatModel.check_tools`); raise :class:`PreflightError` when it fails a
    request that offers them."""
    if not tools or not isinstance(handle.model, ChatModel):
        return
    try:
        with anyio.fail_after(spec.model.timeout_s):
            await handle.model.check_tools(tools)
    except (TimeoutError, HermesError) as exc:
        raise PreflightError(
            f"{spec.model.base_url} failed a 1-token request offering the run's tools "
            f"({_one_line(exc)}); serve a chat template with tools (llama-server: --jinja) or "
            f"check {names('model.base_url')}"
        ) from exc
