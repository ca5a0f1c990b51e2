"""SandboxSpec -> backend, and the terminal/file toolsets with their command timeouts."""

from __future__ import annotations

import importlib.util

import pytest
from hermes_protocols import ConfigError
from hermes_sandbox.factory import (
    BACKEND_KINDS,
    DEFAULT_IMAGE,
    SandboxSpec,
    build_backend,
    build_toolsets,
)
from hypothesis import given
from hypothesis import strategies as st

COMPLETE = {
    "image": "registry.example/sandbox:1",
    "urls": ("http://127.0.0.1:1",),
    "token": "t0k",
    "nomad_address": "http://127.0.0.1:4646",
    "ray_address": "127.0.0.1:6379",
}


@pytest.mark.parametrize(
    "kind",
    [pytest.param(k, marks=pytest.mark.slow) if k == "ray" else k for k in BACKEND_KINDS],
)  # importing Ray takes seconds
def test_every_kind_builds_its_backend(kind: str) -> None:
    if kind == "ray" and importlib.util.find_spec("ray") is None:
        pytest.skip("the ray extra is not installed")
    backend = build_backend(SandboxSpec(kind=kind, **COMPLETE))  # type: ignore[arg-type]
    assert backend.name == kind


def test_unknown_kind_is_a_config_error_listing_the_choices() -> None:
    with pytest.raises(ConfigError, match="bwrap, local, docker, modal, nomad, remote"):
        SandboxSpec(kind="kubernetes")  # type: ignore[arg-type]


def test_settings_reach_the_backend_configs() -> None:
    docker = build_backend(SandboxSpec(kind="docker", allow_network=True))
    assert (docker.config.image, docker.config.allow_network) == (DEFAULT_IMAGE, True)  # type: ignore[attr-defined]
    modal = build_backend(
        SandboxSpec(
            kind="modal",
            image="python:3.11",
            cpu=2.0,
            memory_mb=4096,
            gpu="T4",
            secrets=("hf",),
            idle_timeout_s=900,
            rollout_timeout_s=60,
        )
    )
    config = modal.config  # type: ignore[attr-defined]
    assert (config.image, config.cpu, config.memory_mb, config.gpu) == (
        "python:3.11",
        2.0,
        4096,
        "T4",
    )
    assert (config.secrets, config.idle_timeout_s, config.rollout_timeout_s) == (("hf",), 900, 60)
    assert config.block_network
    nomad = build_backend(
        SandboxSpec(
            kind="nomad",
            image="img",
            nomad_address="http://10.0.0.1:4646",
            nomad_token="acl",
            nomad_job_prefix="",
        )
    )
    assert nomad.job_id("pool-a") == "pool-a"  # type: ignore[attr-defined]
    assert nomad.config.token == "acl"  # type: ignore[attr-defined]


def test_modal_defaults_are_the_backends_own() -> None:
    config = build_backend(SandboxSpec(kind="modal")).config  # type: ignore[attr-defined]
    assert config.image == DEFAULT_IMAGE
    assert (config.cpu, config.memory_mb, config.rollout_timeout_s) == (1.0, 2048, 1800.0)


@pytest.mark.parametrize(
    ("spec", "missing"),
    [
        (SandboxSpec(kind="remote", token="t"), "--urls-option"),
        (SandboxSpec(kind="remote", urls=("http://127.0.0.1:1",)), "--token-option"),
        (SandboxSpec(kind="nomad", image="i"), "--address-option"),
        (SandboxSpec(kind="nomad", nomad_address="http://127.0.0.1:4646"), "--image-option"),
    ],
)
def test_missing_settings_name_the_callers_option(spec: SandboxSpec, missing: str) -> None:
    names = {
        "urls": "--urls-option",
        "token": "--token-option",
        "nomad_address": "--address-option",
        "image": "--image-option",
    }
    with pytest.raises(ConfigError, match=missing):
        build_backend(spec, option_names=names)
    with pytest.raises(ConfigError, match="SandboxSpec\\."):
        build_backend(spec)


def test_tokens_stay_out_of_repr() -> None:
    text = repr(SandboxSpec(kind="remote", token="secret-1", nomad_token="secret-2"))
    assert "secret-1" not in text
    assert "secret-2" not in text


def test_non_positive_modal_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="cpu"):
        SandboxSpec(kind="modal", cpu=0)


@given(default=st.integers(1, 5000), ceiling=st.integers(0, 5000))
def test_terminal_timeout_never_exceeds_its_ceiling(default: int, ceiling: int) -> None:
    toolsets = build_toolsets(default, ceiling)
    assert [ts.name for ts in toolsets] == ["terminal", "file"]
    (terminal,) = toolsets[0].tools
    assert terminal.default_timeout == default  # type: ignore[attr-defined]
    assert terminal.max_timeout == max(default, ceiling)  # type: ignore[attr-defined]


def test_fractional_and_bad_default_timeouts() -> None:
    (terminal,) = build_toolsets(0.5, 10)[0].tools
    assert terminal.default_timeout == 1  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="positive"):
        build_toolsets(0, 10)
