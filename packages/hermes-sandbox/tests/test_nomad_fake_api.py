"""A fake Nomad HTTP API on loopback whose allocations are real ``hermes-sandbox serve`` processes.

It follows the documented endpoints and payloads the nomad backend uses: ``POST /v1/jobs``
(``{"Job": ...}``), ``GET /v1/jobs?prefix=``, ``GET|DELETE /v1/job/:id`` (``?purge=true``),
``GET /v1/job/:id/allocations`` (allocation stubs with ``Name`` ``<job>.<group>[<i>]``,
``ClientStatus``, ``DesiredStatus``, ``TaskStates``), ``GET /v1/allocation/:id`` (with
``AllocatedResources.Shared.Networks[].DynamicPorts``), ``POST /v1/job/:id/scale``
(``{"Count", "Target": {"Group"}}``; shrinking stops the highest indices, as Nomad does) and the
``X-Nomad-Token`` header. The ``raw_exec`` driver runs the task's command with Nomad's
``${NOMAD_*}`` variables interpolated; the ``docker`` driver has no engine here, so its
allocations fail with the "Driver Failure" event Nomad reports for an image pull error.
The conftest loads this file by path.

With :meth:`FakeNomad.prewarm`, raw_exec processes started ahead of time for a given task are
handed to allocations of an identical task and taken back (still running, already reset by
the backend) when the allocation stops, so a test session starts each server once; the
backend sees ordinary allocations. Processes not started by ``prewarm`` always stop with
their allocation.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
import uvicorn
from anyio.abc import Process
from hermes_sandbox.backends.nomad import alloc_address, alloc_failure, alloc_index
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


class FakeNomad:
    def __init__(self, root: Path, *, acl_token: str | None = None) -> None:
        self.root = root
        self.acl_token = acl_token
        self.jobs: dict[str, dict[str, Any]] = {}
        self.allocs: dict[str, dict[str, Any]] = {}
        self.processes: dict[str, Process] = {}
        self.scale_requests: list[dict[str, Any]] = []
        self.index = itertools.count(1)
        self._tg: anyio.abc.TaskGroup | None = None
        self._idle: dict[tuple[Any, ...], list[_Warm]] = {}
        self._lent: dict[str, tuple[tuple[Any, ...], _Warm]] = {}
        self._logs: dict[Process, Path] = {}
        self.reused = 0

    # -- allocation lifecycle ---------------------------------------------------------------

    def _interpolate(self, value: str, env: dict[str, str]) -> str:
        for key, val in env.items():
            value = value.replace("${" + key + "}", val)
        return value

    async def _spawn(
        self, task: dict[str, Any], port: int, alloc_dir: Path, alloc_id: str
    ) -> Process:
        """Run the raw_exec task's command with Nomad's variables interpolated."""
        await anyio.Path(alloc_dir).mkdir(parents=True)
        nomad_env = {
            "NOMAD_PORT_http": str(port),
            "NOMAD_IP_http": "127.0.0.1",
            "NOMAD_ALLOC_DIR": str(alloc_dir),
            "NOMAD_ALLOC_ID": alloc_id,
        }
        argv = [task["Config"]["command"]] + [
            self._interpolate(a, nomad_env) for a in task["Config"].get("args", [])
        ]
        log_dir = self.root / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        log = log_dir / f"{alloc_id[:8]}.stderr"
        with open(log, "wb") as stderr:  # noqa: ASYNC230 - like `nomad alloc logs -stderr`
            process = await anyio.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env={**os.environ, **nomad_env, **task.get("Env", {})},
            )
        self._logs[process] = log
        assert self._tg is not None
        self._tg.start_soon(self._watch, process)
        return process

    async def prewarm(self, task: dict[str, Any], count: int) -> None:
        """Start ``count`` processes of raw_exec ``task`` for allocations of the same task."""
        for _ in range(count):
            warm_id = f"warm{next(self.index):04d}"
            port = _free_port()
            alloc_dir = self.root / warm_id
            process = await self._spawn(task, port, alloc_dir, warm_id)
            self._idle.setdefault(_task_key(task), []).append(_Warm(process, port, alloc_dir))

    async def _start_alloc(self, job: dict[str, Any], group: dict[str, Any], idx: int) -> None:
        alloc_id = str(uuid.uuid4())
        task = group["Tasks"][0]
        warm = None
        if task["Driver"] == "raw_exec":
            idle = self._idle.get(_task_key(task), [])
            while idle and warm is None:
                candidate = idle.pop()
                if candidate.process.returncode is None:
                    warm = candidate
        port = warm.port if warm is not None else _free_port()
        alloc_dir = warm.alloc_dir if warm is not None else self.root / alloc_id[:8]
        alloc: dict[str, Any] = {
            "ID": alloc_id,
            "Name": f"{job['ID']}.{group['Name']}[{idx}]",
            "JobID": job["ID"],
            "TaskGroup": group["Name"],
            "Namespace": job.get("Namespace", "default"),
            "ClientStatus": "pending",
            "DesiredStatus": "run",
            "CreateIndex": next(self.index),
            "TaskStates": {task["Name"]: {"State": "pending", "Failed": False, "Events": []}},
            "AllocatedResources": {
                "Shared": {
                    "Networks": [
                        {
                            "Mode": "host",
                            "IP": "127.0.0.1",
                            "DynamicPorts": [
                                {"Label": "http", "Value": port, "To": 0, "HostNetwork": "default"}
                            ],
                        }
                    ],
                    "Ports": [{"Label": "http", "Value": port, "HostIP": "127.0.0.1"}],
                }
            },
        }
        self.allocs[alloc_id] = alloc
        state = alloc["TaskStates"][task["Name"]]
        if task["Driver"] != "raw_exec":
            image = task["Config"].get("image")
            state.update(State="dead", Failed=True)
            state["Events"].append(
                {
                    "Type": "Driver Failure",
                    "DisplayMessage": f"Failed to pull `{image}`: manifest unknown",
                    "DriverError": f"Failed to pull `{image}`: manifest unknown",
                }
            )
            alloc["ClientStatus"] = "failed"
            return
        if warm is not None:
            process = warm.process
            self._lent[alloc_id] = (_task_key(task), warm)
            self.reused += 1
        else:
            process = await self._spawn(task, port, alloc_dir, alloc_id)
        self.processes[alloc_id] = process
        alloc["ClientStatus"] = "running"
        state["State"] = "running"
        state["Events"].append({"Type": "Started", "DisplayMessage": "Task started by client"})

    async def _watch(self, process: Process) -> None:
        code = await process.wait()
        owners = [a for a, p in self.processes.items() if p is process]
        alloc = self.allocs.get(owners[0]) if owners else None
        if alloc is not None and alloc["DesiredStatus"] == "run":
            alloc["ClientStatus"] = "failed"
            for state in alloc["TaskStates"].values():
                state.update(State="dead", Failed=True)
                log = self._logs[process]
                tail = (
                    log.read_text(errors="replace").strip().splitlines()[-1:]
                    if log.exists()
                    else []
                )
                message = f"Exit Code: {code}" + (f", Exit Message: {tail[0]}" if tail else "")
                state["Events"].append({"Type": "Terminated", "DisplayMessage": message})

    async def _stop_alloc(self, alloc_id: str) -> None:
        alloc = self.allocs[alloc_id]
        alloc["DesiredStatus"] = "stop"
        process = self.processes.pop(alloc_id, None)
        lent = self._lent.pop(alloc_id, None)
        if lent is not None and process is not None and process.returncode is None:
            key, warm = lent  # back to the idle processes, still running
            self._idle.setdefault(key, []).append(warm)
            if alloc["ClientStatus"] in ("pending", "running"):
                alloc["ClientStatus"] = "complete"
            return
        await self._kill(process)
        if alloc["ClientStatus"] in ("pending", "running"):
            alloc["ClientStatus"] = "complete"
        alloc_dir = lent[1].alloc_dir if lent is not None else self.root / alloc_id[:8]
        await anyio.to_thread.run_sync(
            lambda: subprocess.run(["rm", "-rf", str(alloc_dir)], check=False)
        )

    async def _kill(self, process: Process | None) -> None:
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(60):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()

    async def _reconcile(self, job_id: str) -> None:
        job = self.jobs[job_id]
        group = job["TaskGroups"][0]
        live = {
            alloc_index(a): a["ID"]
            for a in self.allocs.values()
            if a["JobID"] == job_id and a["DesiredStatus"] == "run"
        }
        count = 0 if job.get("Stop") else int(group["Count"])
        for idx, alloc_id in sorted(live.items(), key=lambda kv: -(kv[0] or 0)):
            if idx is not None and idx >= count:
                await self._stop_alloc(alloc_id)
        for idx in range(count):
            if idx not in live:
                await self._start_alloc(job, group, idx)

    # -- HTTP -------------------------------------------------------------------------------

    def _denied(self, request: Request) -> Response | None:
        if self.acl_token and request.headers.get("x-nomad-token") != self.acl_token:
            return Response("Permission denied", status_code=403)
        return None

    async def register(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        job = (await request.json())["Job"]
        group = job["TaskGroups"][0]
        assert group["Networks"][0]["DynamicPorts"][0]["Label"] == "http"
        assert group["Tasks"][0]["Driver"] in ("docker", "raw_exec")
        job.setdefault("Status", "running")
        self.jobs[job["ID"]] = job
        await self._reconcile(job["ID"])
        return JSONResponse({"EvalID": str(uuid.uuid4()), "JobModifyIndex": next(self.index)})

    async def list_jobs(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        prefix = request.query_params.get("prefix", "")
        return JSONResponse(
            [
                {"ID": j["ID"], "Name": j["Name"], "Type": j["Type"], "Status": "running"}
                for j in self.jobs.values()
                if j["ID"].startswith(prefix)
            ]
        )

    async def job(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        job_id = request.path_params["job_id"]
        if job_id not in self.jobs:
            return Response("job not found", status_code=404)
        if request.method == "GET":
            return JSONResponse(self.jobs[job_id])
        self.jobs[job_id]["Stop"] = True
        await self._reconcile(job_id)
        if request.query_params.get("purge") == "true":
            del self.jobs[job_id]
            for alloc_id in [a for a, v in self.allocs.items() if v["JobID"] == job_id]:
                del self.allocs[alloc_id]
        return JSONResponse({"EvalID": str(uuid.uuid4())})

    async def job_allocations(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        job_id = request.path_params["job_id"]
        stubs = [
            {k: v for k, v in a.items() if k != "AllocatedResources"}
            for a in self.allocs.values()
            if a["JobID"] == job_id
        ]
        return JSONResponse(stubs)

    async def allocation(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        alloc = self.allocs.get(request.path_params["alloc_id"])
        if alloc is None:
            return Response("alloc not found", status_code=404)
        return JSONResponse(alloc)

    async def scale(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        job_id = request.path_params["job_id"]
        body = await request.json()
        self.scale_requests.append(body)
        job = self.jobs.get(job_id)
        if job is None:
            return Response("job not found", status_code=404)
        group = job["TaskGroups"][0]
        if body.get("Target", {}).get("Group") != group["Name"]:
            return Response("task group not found", status_code=400)
        group["Count"] = int(body["Count"])
        await self._reconcile(job_id)
        return JSONResponse({"EvalID": str(uuid.uuid4()), "JobModifyIndex": next(self.index)})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/jobs", self.register, methods=["POST", "PUT"]),
                Route("/v1/jobs", self.list_jobs, methods=["GET"]),
                Route("/v1/job/{job_id}", self.job, methods=["GET", "DELETE"]),
                Route("/v1/job/{job_id}/allocations", self.job_allocations, methods=["GET"]),
                Route("/v1/job/{job_id}/scale", self.scale, methods=["POST"]),
                Route("/v1/allocation/{alloc_id}", self.allocation, methods=["GET"]),
            ]
        )

    def running_processes(self) -> int:
        """Processes serving allocations (idle prewarmed ones not counted)."""
        return sum(1 for p in self.processes.values() if p.returncode is None)

    def live_allocations(self) -> list[str]:
        """Names of allocations still desired to run (jobs not stopped or purged)."""
        return [a["Name"] for a in self.allocs.values() if a["DesiredStatus"] == "run"]

    @contextlib.asynccontextmanager
    async def serve(self) -> AsyncIterator[str]:
        """Run the API on a free loopback port; on exit stop every allocation."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # NODELAY
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(self.app(), log_level="warning", lifespan="off"))
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(server.serve, [sock])
                with anyio.fail_after(30):
                    while not server.started:  # noqa: ASYNC110 - uvicorn only has a flag
                        await anyio.sleep(0.02)
                try:
                    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
                finally:
                    with anyio.CancelScope(shield=True):
                        for alloc_id in list(self.processes):
                            await self._stop_alloc(alloc_id)
                        for warms in self._idle.values():
                            for warm in warms:
                                await self._kill(warm.process)
                                await anyio.to_thread.run_sync(
                                    lambda d=warm.alloc_dir: shutil.rmtree(d, ignore_errors=True)
                                )
                        self._idle.clear()
                        server.should_exit = True
        finally:
            sock.close()


@attrs.frozen
class _Warm:
    """A prewarmed raw_exec process, its port and its allocation directory."""

    process: Process
    port: int
    alloc_dir: Path


def _task_key(task: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two tasks run the same process (everything but Nomad's own variables)."""
    config = task["Config"]
    return (
        task["Driver"],
        config.get("command"),
        tuple(config.get("args", [])),
        tuple(sorted(task.get("Env", {}).items())),
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_alloc_helpers_read_documented_shapes() -> None:
    alloc = {
        "ID": "a1",
        "Name": "job.sandbox[12]",
        "ClientStatus": "running",
        "Resources": {
            "Networks": [{"IP": "10.0.0.5", "DynamicPorts": [{"Label": "http", "Value": 2345}]}]
        },
    }
    assert alloc_address(alloc) == "http://10.0.0.5:2345"
    assert alloc_index(alloc) == 12
    assert alloc_failure(alloc) is None
    failed = {
        "ClientStatus": "failed",
        "TaskStates": {
            "server": {
                "Failed": True,
                "Events": [
                    {"Type": "Driver Failure", "DisplayMessage": "Failed to pull `x`: denied"}
                ],
            }
        },
    }
    reason = alloc_failure(failed)
    assert reason is not None
    assert "Failed to pull" in reason


@pytest.mark.parametrize("status", ["pending", "running", "complete"])
def test_live_allocations_are_not_failures(status: str) -> None:
    assert alloc_failure({"ClientStatus": status, "TaskStates": {"t": {"Events": []}}}) is None
