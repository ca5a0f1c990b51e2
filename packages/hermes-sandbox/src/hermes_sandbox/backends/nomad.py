"""The ``nomad`` backend: hosts are allocations of a Nomad service job running the sandbox server.

One job per pool (``<job_prefix><pool_name>``), one task group whose task runs ``hermes-sandbox
serve`` (docker or raw_exec driver) on a dynamic port. A host is one allocation: starting a host
scales the group up by one through the job scale endpoint and waits for the new allocation to
run and its server to answer; a host is reached with the ``remote`` backend's client.

Nomad stops the highest-indexed allocations when a group shrinks, so a closed host whose index
is not the highest is kept *retired* (reset, idle) and handed to the next ``start_host``; the
group shrinks as soon as the top indices are retired, and the job is stopped and purged when
the last host closes. Image pull errors and failed allocations fail ``start_host`` at once.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Any

import anyio
import attrs
import httpx
from hermes_protocols import ConfigError, SandboxError, SandboxTimeout

from hermes_sandbox.backends.base import Host, HostSpec
from hermes_sandbox.backends.remote import RemoteHost, RemoteTimeouts

GROUP = "sandbox"
TASK = "server"
PORT_LABEL = "http"
POOL_META = "hermes-pool"
_ALLOC_INDEX = re.compile(r"\[(\d+)\]$")


class NomadError(SandboxError):
    """The Nomad API refused a request or an allocation failed."""


class NomadImagePullError(NomadError):
    """The docker driver could not pull the sandbox server image."""


@attrs.frozen(slots=True, kw_only=True)
class NomadConfig:
    """Where the cluster is and what each allocation runs.

    ``driver="docker"`` runs ``image`` (which must contain ``hermes-sandbox`` and bubblewrap);
    ``driver="raw_exec"`` runs ``command`` (the ``hermes-sandbox`` executable on the client
    nodes). ``token`` is sent as ``X-Nomad-Token``; ``server_token`` is the bearer token of the
    sandbox servers (random per backend when not given).
    """

    address: str = "http://127.0.0.1:4646"
    token: str | None = attrs.field(default=None, repr=False)
    namespace: str = "default"
    region: str | None = None
    datacenters: tuple[str, ...] = ("*",)
    driver: str = "docker"
    image: str | None = None
    command: str = "hermes-sandbox"
    docker_security_opt: tuple[str, ...] = ("seccomp=unconfined", "apparmor=unconfined")
    cpu_mhz: int = 1000
    memory_mb: int = 2048
    allow_network: bool = False
    job_prefix: str = "hermes-sandbox-"
    server_token: str | None = attrs.field(default=None, repr=False)
    start_timeout_s: float = 300.0
    poll_interval_s: float = 1.0
    http_timeout_s: float = 30.0
    remote_timeouts: RemoteTimeouts = attrs.field(factory=RemoteTimeouts)
    env: Mapping[str, str] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if self.driver not in ("docker", "raw_exec"):
            raise ConfigError(
                f"NomadConfig.driver must be 'docker' or 'raw_exec', not {self.driver!r}"
            )
        if self.driver == "docker" and not self.image:
            raise ConfigError("NomadConfig.image is required with the docker driver")
        if not self.address.startswith(("http://", "https://")):
            raise ConfigError(f"NomadConfig.address must be an http(s) URL: {self.address!r}")


def job_payload(
    config: NomadConfig, job_id: str, pool_name: str, slots: int, token: str
) -> dict[str, Any]:
    """The ``POST /v1/jobs`` body for a pool's sandbox-server job (count 1)."""
    bind = "0.0.0.0" if config.driver == "docker" else "${NOMAD_IP_" + PORT_LABEL + "}"
    args = [
        "serve",
        "--host",
        bind,
        "--port",
        "${NOMAD_PORT_" + PORT_LABEL + "}",
        "--slots",
        str(slots),
        "--data-dir",
        "${NOMAD_ALLOC_DIR}/data",
    ]
    if config.allow_network:
        args.append("--allow-network")
    driver_config: dict[str, Any]
    if config.driver == "docker":
        driver_config = {
            "image": config.image,
            "command": config.command,
            "args": args,
            "ports": [PORT_LABEL],
            "security_opt": list(config.docker_security_opt),
        }
    else:
        driver_config = {"command": config.command, "args": args}
    job: dict[str, Any] = {
        "ID": job_id,
        "Name": job_id,
        "Type": "service",
        "Namespace": config.namespace,
        "Datacenters": list(config.datacenters),
        "Meta": {POOL_META: pool_name},
        "TaskGroups": [
            {
                "Name": GROUP,
                "Count": 1,
                "Networks": [{"DynamicPorts": [{"Label": PORT_LABEL}]}],
                # A failed allocation is reported, not silently restarted elsewhere.
                "RestartPolicy": {"Attempts": 0, "Mode": "fail"},
                "ReschedulePolicy": {"Attempts": 0, "Unlimited": False},
                "Tasks": [
                    {
                        "Name": TASK,
                        "Driver": config.driver,
                        "Config": driver_config,
                        "Env": {**config.env, "HERMES_SANDBOX_TOKEN": token},
                        "Resources": {"CPU": config.cpu_mhz, "MemoryMB": config.memory_mb},
                        "KillTimeout": 30_000_000_000,
                    }
                ],
            }
        ],
    }
    if config.region:
        job["Region"] = config.region
    return {"Job": job}


def alloc_address(alloc: Mapping[str, Any]) -> str | None:
    """``http://ip:port`` of the allocation's ``http`` port (shared or legacy task networks)."""
    networks: list[Any] = []
    shared = (alloc.get("AllocatedResources") or {}).get("Shared") or {}
    networks += shared.get("Networks") or []
    for task in ((alloc.get("AllocatedResources") or {}).get("Tasks") or {}).values():
        networks += (task or {}).get("Networks") or []
    networks += (alloc.get("Resources") or {}).get("Networks") or []
    for net in networks:
        for port in (net.get("DynamicPorts") or []) + (net.get("ReservedPorts") or []):
            if port.get("Label") == PORT_LABEL and net.get("IP"):
                return f"http://{net['IP']}:{port['Value']}"
    return None


def alloc_failure(alloc: Mapping[str, Any]) -> str | None:
    """Why the allocation cannot run (driver failure, failed task), or ``None``."""
    for name, state in (alloc.get("TaskStates") or {}).items():
        for event in (state or {}).get("Events") or []:
            kind = event.get("Type", "")
            text = event.get("DisplayMessage") or event.get("DriverError") or ""
            if kind == "Driver Failure" or ("pull" in text.lower() and "fail" in text.lower()):
                return f"task {name}: {kind}: {text}"
        if (state or {}).get("Failed"):
            return f"task {name} failed"
    if alloc.get("ClientStatus") in ("failed", "lost"):
        return f"allocation {alloc.get('ID')} is {alloc.get('ClientStatus')}"
    return None


def alloc_index(alloc: Mapping[str, Any]) -> int | None:
    match = _ALLOC_INDEX.search(str(alloc.get("Name", "")))
    return int(match.group(1)) if match else None


class NomadBackend:
    """Scales one Nomad job per pool; each allocation is a host."""

    def __init__(self, config: NomadConfig) -> None:
        self.config = config
        self.server_token = config.server_token or secrets.token_urlsafe(24)
        headers = {"X-Nomad-Token": config.token} if config.token else {}
        self._http = httpx.AsyncClient(
            base_url=config.address.rstrip("/"), headers=headers, timeout=config.http_timeout_s
        )
        self._lock = anyio.Lock()
        self._jobs: dict[str, _JobState] = {}

    @property
    def name(self) -> str:
        return "nomad"

    def job_id(self, pool_name: str) -> str:
        return f"{self.config.job_prefix}{pool_name}"

    async def aclose(self) -> None:
        """Stop and purge every job this backend still runs, close the HTTP client."""
        with anyio.CancelScope(shield=True):
            for job_id in list(self._jobs):
                await self._purge(job_id)
            self._jobs.clear()
            await self._http.aclose()

    # -- Nomad API ------------------------------------------------------------------------

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        params = {"namespace": self.config.namespace, **kwargs.pop("params", {})}
        if self.config.region:
            params["region"] = self.config.region
        try:
            response = await self._http.request(method, "/v1" + path, params=params, **kwargs)
        except httpx.TimeoutException as exc:
            raise SandboxTimeout(
                f"Nomad {method} {path} timed out at {self.config.address}"
            ) from exc
        except httpx.TransportError as exc:
            raise NomadError(f"Nomad at {self.config.address} unreachable: {exc!r}") from exc
        if response.status_code == 403:
            raise NomadError(
                f"Nomad refused {method} {path} (403: {response.text.strip()}); the ACL token "
                "(NomadConfig.token, sent as X-Nomad-Token) needs submit-job and read-job"
            )
        if response.status_code == 404:
            return None
        if not response.is_success:
            detail = response.text.strip()[:500]
            raise NomadError(f"Nomad {method} {path} failed ({response.status_code}): {detail}")
        return response.json() if response.content else None

    async def _purge(self, job_id: str) -> None:
        await self._call("DELETE", f"/job/{job_id}", params={"purge": "true"})

    async def _scale(self, job_id: str, count: int) -> None:
        await self._call(
            "POST",
            f"/job/{job_id}/scale",
            json={
                "Count": count,
                "Target": {"Group": GROUP},
                "Message": f"hermes-sandbox pool now needs {count} allocation(s)",
            },
        )

    # -- hosts ----------------------------------------------------------------------------

    async def start_host(self, spec: HostSpec) -> Host:
        job_id = self.job_id(spec.pool_name)
        async with self._lock:
            state = self._jobs.get(job_id)
            if state is None:
                state = _JobState(slots=spec.slots)
                await self._call(
                    "POST",
                    "/jobs",
                    json=job_payload(
                        self.config, job_id, spec.pool_name, spec.slots, self.server_token
                    ),
                )
                self._jobs[job_id] = state
                state.count = 1
                index = 0
            elif spec.slots != state.slots:
                raise ConfigError(
                    f"pool {spec.pool_name} already runs {state.slots}-slot allocations; "
                    f"cannot start one with {spec.slots}"
                )
            elif state.retired:
                index = min(state.retired)
                state.retired.discard(index)
            else:
                index = state.count
                state.count += 1
                await self._scale(job_id, state.count)
            state.claimed.add(index)
        try:
            alloc_id, url = await self._wait_for_allocation(job_id, index)
            host = await self._connect(spec, job_id, index, alloc_id, url)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._give_back(job_id, index)
            raise
        return host

    async def _wait_for_allocation(self, job_id: str, index: int) -> tuple[str, str]:
        """(allocation id, server URL) once allocation ``index`` runs; fails fast if it fails."""
        name = f"{job_id}.{GROUP}[{index}]"
        try:
            with anyio.fail_after(self.config.start_timeout_s):
                while True:
                    allocs = await self._call("GET", f"/job/{job_id}/allocations") or []
                    mine = [
                        a
                        for a in allocs
                        if a.get("Name") == name and a.get("DesiredStatus") == "run"
                    ]
                    mine.sort(key=lambda a: int(a.get("CreateIndex", 0)))
                    if mine:
                        stub = mine[-1]
                        failure = alloc_failure(stub)
                        if failure is not None:
                            kind = NomadImagePullError if "pull" in failure.lower() else NomadError
                            raise kind(f"allocation {name} cannot run: {failure}")
                        if stub.get("ClientStatus") == "running":
                            alloc = await self._call("GET", f"/allocation/{stub['ID']}")
                            url = alloc_address(alloc or {})
                            if url is None:
                                raise NomadError(f"allocation {name} has no '{PORT_LABEL}' port")
                            return str(stub["ID"]), url
                    await anyio.sleep(self.config.poll_interval_s)
        except TimeoutError as exc:
            raise SandboxTimeout(
                f"allocation {name} was not running after {self.config.start_timeout_s}s; "
                "check the cluster's capacity and `nomad job status`"
            ) from exc

    async def _connect(
        self, spec: HostSpec, job_id: str, index: int, alloc_id: str, url: str
    ) -> Host:
        async def on_close() -> None:
            await self._give_back(job_id, index)

        last: Exception | None = None
        try:
            with anyio.fail_after(self.config.start_timeout_s):
                while True:
                    try:
                        return await RemoteHost.connect(
                            spec,
                            url,
                            self.server_token,
                            self.config.remote_timeouts,
                            on_close=on_close,
                        )
                    except SandboxError as exc:  # the server may still be starting
                        last = exc
                        if "unreachable" not in str(exc):
                            raise
                    alloc = await self._call("GET", f"/allocation/{alloc_id}") or {}
                    failure = alloc_failure(alloc)
                    if failure is not None or alloc.get("DesiredStatus", "run") != "run":
                        raise NomadError(
                            f"sandbox server of allocation {alloc_id} stopped before answering: "
                            f"{failure or alloc.get('DesiredStatus')}"
                        )
                    await anyio.sleep(self.config.poll_interval_s)
        except TimeoutError as exc:
            raise SandboxTimeout(f"sandbox server at {url} never answered: {last}") from exc

    async def _give_back(self, job_id: str, index: int) -> None:
        """Retire allocation ``index``; shrink the group past retired top indices."""
        async with self._lock:
            state = self._jobs.get(job_id)
            if state is None or index not in state.claimed:
                return
            state.claimed.discard(index)
            state.retired.add(index)
            count = state.count
            while count > 0 and (count - 1) in state.retired:
                count -= 1
                state.retired.discard(count)
            if count == state.count:
                return
            state.count = count
            if count == 0:
                del self._jobs[job_id]
                await self._purge(job_id)
            else:
                await self._scale(job_id, count)

    async def sweep_orphans(self, pool_name: str) -> int:
        """Purge the pool's job if a killed earlier run left it; returns the allocations it had."""
        job_id = self.job_id(pool_name)
        if job_id in self._jobs:
            return 0
        jobs = await self._call("GET", "/jobs", params={"prefix": job_id}) or []
        if not any(j.get("ID") == job_id for j in jobs):
            return 0
        allocs = await self._call("GET", f"/job/{job_id}/allocations") or []
        await self._purge(job_id)
        return sum(1 for a in allocs if a.get("ClientStatus") in ("pending", "running"))


@attrs.define
class _JobState:
    slots: int
    count: int = 0
    claimed: set[int] = attrs.field(factory=set)
    retired: set[int] = attrs.field(factory=set)
