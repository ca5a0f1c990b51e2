"""The package's public API: every name re-exported, and ``import hermes_sandbox`` stays cheap."""

from __future__ import annotations

import json
import subprocess
import sys

import hermes_sandbox
import pytest

CLUSTER_API = {
    "ServerConfig": "hermes_sandbox.server.app",
    "create_app": "hermes_sandbox.server.app",
    "serve": "hermes_sandbox.server.run",
    "running_server": "hermes_sandbox.server.run",
    "RemoteBackend": "hermes_sandbox.backends.remote",
    "RemoteConfig": "hermes_sandbox.backends.remote",
    "RemoteTimeouts": "hermes_sandbox.backends.remote_client",
    "RemoteHost": "hermes_sandbox.backends.remote",
    "RemoteSlot": "hermes_sandbox.backends.remote",
    "DockerBackend": "hermes_sandbox.backends.docker",
    "DockerConfig": "hermes_sandbox.backends.docker_config",
    "ModalBackend": "hermes_sandbox.backends.modal",
    "ModalConfig": "hermes_sandbox.backends.modal_config",
    "ModalAuthError": "hermes_sandbox.backends.modal_sdk",
    "NomadBackend": "hermes_sandbox.backends.nomad",
    "NomadConfig": "hermes_sandbox.backends.nomad",
    "NomadError": "hermes_sandbox.backends.nomad",
    "NomadImagePullError": "hermes_sandbox.backends.nomad",
}
HEAVY = ("modal", "httpx", "starlette", "uvicorn")


def _modules_after(code: str) -> dict[str, bool]:
    probe = (
        f"{code}\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    loaded: dict[str, bool] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def test_cluster_api_is_re_exported_from_its_defining_modules() -> None:
    for name, module in CLUSTER_API.items():
        assert name in hermes_sandbox.__all__
        obj = getattr(hermes_sandbox, name)
        assert obj.__module__ == module, name
        assert obj is getattr(sys.modules[module], name)
    assert set(CLUSTER_API) <= set(dir(hermes_sandbox))


def test_every_name_in_all_resolves() -> None:
    assert len(set(hermes_sandbox.__all__)) == len(hermes_sandbox.__all__)
    for name in hermes_sandbox.__all__:
        assert getattr(hermes_sandbox, name) is not None


def test_unknown_names_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        _ = hermes_sandbox.no_such_thing  # type: ignore[attr-defined]


def test_import_loads_no_cluster_dependency() -> None:
    assert _modules_after("import hermes_sandbox") == dict.fromkeys(HEAVY, False)


@pytest.mark.slow
def test_modal_sdk_is_imported_only_when_a_backend_talks_to_modal() -> None:
    loaded = _modules_after(
        "from hermes_sandbox import ModalBackend, ModalConfig\n"
        "ModalBackend(ModalConfig(image='python:3.12-slim'))"
    )
    assert loaded["modal"] is False
    loaded = _modules_after(
        "from hermes_sandbox.backends.modal_sdk import ModalSDK\nModalSDK.real()"
    )
    assert loaded["modal"] is True
