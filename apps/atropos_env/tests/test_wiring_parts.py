"""The pieces the wiring derives from --env.*: registry names, dataset mapping, pool sizing,
toolsets, system-prompt override."""

from __future__ import annotations

import pytest
from hermes_atropos_env import HermesAtroposEnvConfig
from hermes_atropos_env.registry import build_registry, environment_options, parser_names
from hermes_atropos_env.sandboxes import build_backend, build_toolsets, pool_config
from hermes_atropos_env.wiring import SystemPromptOverride
from hermes_protocols import ConfigError


def test_registry_and_parsers_offer_what_the_docs_name() -> None:
    assert {"endless_terminals", "swe_smith_oracle"} <= set(build_registry().names())
    assert "hermes" in parser_names()


def test_dataset_fields_map_onto_swe_smith_config(tmp_path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("")
    base = {"environment": "swe_smith_oracle"}
    assert environment_options(HermesAtroposEnvConfig(**base)) == {}
    assert environment_options(HermesAtroposEnvConfig(**base, dataset_name=str(rows))) == {
        "source": "jsonl",
        "jsonl_path": str(rows),
    }
    hub = HermesAtroposEnvConfig(**base, dataset_name="org/set", dataset_split="test")
    assert environment_options(hub) == {"source": "hf", "hf_dataset": "org/set", "hf_split": "test"}
    build_registry().create("swe_smith_oracle", environment_options(HermesAtroposEnvConfig(**base)))


def test_pool_sizing_follows_the_backend_fields() -> None:
    modal = HermesAtroposEnvConfig(
        tool_pool_mode="modal", modal_slots_per_sandbox=10, modal_min_sandboxes=1
    )
    config = pool_config(modal)
    assert (config.slots_per_host, config.min_hosts, config.max_hosts) == (10, 1, 8)
    bwrap = pool_config(HermesAtroposEnvConfig(slots_per_container=3, max_containers=2))
    assert (bwrap.slots_per_host, bwrap.min_hosts, bwrap.max_hosts) == (3, 0, 2)
    assert bwrap.idle_timeout == 3600


def test_unwired_backends_fail_with_what_to_use() -> None:
    with pytest.raises(ConfigError, match="use bwrap, local or modal"):
        build_backend(HermesAtroposEnvConfig(tool_pool_mode="nomad"))


def test_terminal_toolset_uses_terminal_timeout() -> None:
    toolsets = {ts.name: ts for ts in build_toolsets(HermesAtroposEnvConfig(terminal_timeout=7))}
    assert set(toolsets) == {"terminal", "file"}
    (terminal,) = toolsets["terminal"].tools
    assert terminal.default_timeout == 7


def test_system_prompt_override_replaces_only_the_system_message() -> None:
    env = build_registry().create("endless_terminals")
    item = next(iter(env.items(seed=0)))
    wrapped = SystemPromptOverride(env, "Be brief.")
    original, new = list(env.prompt(item)), list(wrapped.prompt(item))
    assert new[0].role == "system"
    assert new[0].content == "Be brief."
    assert [m for m in original if m.role != "system"] == new[1:]
    assert wrapped.name == env.name
    assert wrapped.toolsets == env.toolsets
