from __future__ import annotations

import pytest
from hermes_batch_runner.config import config_from_options
from hermes_batch_runner.credentials import Credentials
from hermes_batch_runner.sandboxes import build_backend, build_toolsets, pool_config
from hermes_protocols import ConfigError


@pytest.mark.parametrize(
    ("options", "backend_name"),
    [
        ({}, "bwrap"),
        ({"sandbox": "local"}, "local"),
        ({"sandbox": "docker", "sandbox_image": "python:3.12"}, "docker"),
        ({"sandbox": "modal"}, "modal"),
        ({"sandbox": "remote", "sandbox_url": ["http://127.0.0.1:1"]}, "remote"),
        (
            {"sandbox": "nomad", "nomad_address": "http://127.0.0.1:4646", "sandbox_image": "i"},
            "nomad",
        ),
    ],
)
def test_every_sandbox_option_builds_its_backend(
    options: dict[str, object], backend_name: str
) -> None:
    backend = build_backend(config_from_options(options), Credentials(sandbox_token="t"))
    assert backend.name == backend_name


def test_missing_sandbox_settings_are_named() -> None:
    with pytest.raises(ConfigError, match="--sandbox-token"):
        build_backend(
            config_from_options({"sandbox": "remote", "sandbox_url": "http://127.0.0.1:1"}),
            Credentials(),
        )
    with pytest.raises(ConfigError, match="--sandbox-image"):
        build_backend(
            config_from_options({"sandbox": "nomad", "nomad_address": "http://127.0.0.1:4646"}),
            Credentials(),
        )
    with pytest.raises(ConfigError, match="--nomad-address"):
        config_from_options({"sandbox": "nomad"})


def test_pool_and_toolsets_follow_the_options() -> None:
    config = config_from_options({"sandbox_slots": 3, "sandbox_max_hosts": 2})
    pool = pool_config(config, "batch-abc")
    assert (pool.name, pool.slots_per_host, pool.max_hosts) == ("batch-abc", 3, 2)
    assert [t.name for t in build_toolsets(config)] == ["terminal", "file"]
