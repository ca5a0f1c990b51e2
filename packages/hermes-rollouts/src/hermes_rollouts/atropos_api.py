"""The trainer's side of Atropos' ``run-api``: register as the trainer, pull ``/batch``."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
from hermes_protocols import BackendTimeout

#: one group of a batch, as the environment posted it (``tokens``, ``masks``, ``scores``, ...)
Group = dict[str, Any]


async def register_trainer(
    client: httpx.AsyncClient,
    *,
    batch_size: int,
    max_token_len: int,
    num_steps: int,
    wandb_project: str = "hermes-rl",
    wandb_group: str = "atropos",
) -> int:
    """``POST /register`` as a trainer; returns the trainer's uuid."""
    response = await client.post(
        "/register",
        json={
            "wandb_group": wandb_group,
            "wandb_project": wandb_project,
            "batch_size": batch_size,
            "max_token_len": max_token_len,
            "checkpoint_dir": "",
            "save_checkpoint_interval": -1,
            "starting_step": 0,
            "num_steps": num_steps,
        },
    )
    response.raise_for_status()
    return int(response.json()["uuid"])


async def pull_batch(
    client: httpx.AsyncClient, *, timeout: float, poll_interval: float = 0.5
) -> list[Group]:
    """Poll ``GET /batch`` until a batch arrives; :class:`BackendTimeout` after ``timeout``."""
    try:
        with anyio.fail_after(timeout):
            while True:
                response = await client.get("/batch")
                response.raise_for_status()
                batch = response.json().get("batch")
                if batch:
                    return list(batch)
                await anyio.sleep(poll_interval)
    except TimeoutError as exc:
        raise BackendTimeout(f"no batch from {client.base_url} within {timeout:.0f}s") from exc
