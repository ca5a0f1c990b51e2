"""The verifiers adapter's rollouts run on a loop of their own
(``hermes_verifiers_env.own_loop``): when the caller's loop closes under a pending rollout (as
``asyncio.run`` does when vf-eval's ``KeyboardInterrupt`` escapes its clean-up), the rollout is
cancelled and cleaned up (by the caller's cancellation, or once the interpreter starts shutting
down when the caller's loop closed without one), and the process exits. On the caller's loop
itself, the same rollout's AnyIO worker thread (never stopped) keeps the interpreter waiting
forever."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the stranded case waits out its timeout

OWN_LOOP = Path(__file__).parents[1] / "apps/verifiers_env/src/hermes_verifiers_env/own_loop.py"
SCRIPT = """
import asyncio, importlib.util, sys, time
from pathlib import Path
import anyio

spec = importlib.util.spec_from_file_location("own_loop", sys.argv[1])
own_loop = importlib.util.module_from_spec(spec)
spec.loader.exec_module(own_loop)
mark = Path(sys.argv[2])

async def rollout():
    await anyio.to_thread.run_sync(time.sleep, 0)  # an AnyIO worker thread, as sandboxes start
    try:
        await anyio.sleep(3600)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(mark.write_text, "cleaned up")

async def interrupted():
    await asyncio.sleep(1)
    raise KeyboardInterrupt  # what vf-eval's signal handler raises inside a task

async def main():  # verifiers' gather_rollouts
    work = own_loop.run_on_own_loop(rollout) if sys.argv[3] == "own" else rollout()
    tasks = [asyncio.ensure_future(work), asyncio.ensure_future(interrupted())]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise

if sys.argv[3] == "abandoned":  # the caller's loop closes under it, never cancelling it
    loop = asyncio.new_event_loop()
    pending = loop.create_task(own_loop.run_on_own_loop(rollout))
    loop.run_until_complete(asyncio.sleep(1))
    loop.close()
else:
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
"""


@pytest.mark.parametrize("loop", ["own", "abandoned", "caller"])
def test_a_rollout_under_a_closed_loop_is_cleaned_up_and_the_process_exits(
    loop: str, tmp_path: Path
) -> None:
    mark = tmp_path / "mark"
    argv = [sys.executable, "-c", SCRIPT, str(OWN_LOOP), str(mark), loop]
    process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        process.wait(timeout=8)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        assert loop == "caller", "the rollout on its own loop kept the process alive"
        return
    assert loop != "caller", "the caller's loop no longer strands its worker thread"
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    assert mark.read_text() == "cleaned up"
