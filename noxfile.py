"""Project sessions. Every session runs inside the uv workspace environment (`uv sync`)."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["ci"]

PACKAGES = [
    "packages/hermes-protocols/src",
    "packages/hermes-parsers/src",
    "packages/hermes-loop/src",
    "packages/hermes-sandbox/src",
    "packages/hermes-envs/src",
    "packages/hermes-rollouts/src",
    "apps/atropos_env/src",
    "apps/batch_runner/src",
    "apps/trainer/src",
    "apps/verifiers_env/src",
    "apps/tinker_cookbook_env/src",
    "apps/trl_env/src",
    "packages/hermes-report/src",
    "examples/sales_report/src",
]
RUN = ("uv", "run", "--frozen", "--no-sync")
#: the apps outside the default sync, for import-linter
LINT_PATH = "apps/trainer/src:apps/verifiers_env/src:apps/tinker_cookbook_env/src:apps/trl_env/src"
#: the trainer's own dependencies (JAX, optax, matplotlib; TensorBoard and wandb for --log-to) on
#: top of the default environment
TRAINER_DEPS = (
    *("uv", "sync", "--frozen", "--inexact", "--package", "hermes-trainer"),
    *("--extra", "logging"),
)
#: Ray, hermes-sandbox's optional ``ray`` extra (the ``ray`` sandbox backend and its live-cluster
#: tests), on top of the default environment
RAY_DEPS = ("uv", "sync", "--frozen", "--inexact", "--package", "hermes-sandbox", "--extra", "ray")
#: the fast tier (docs/testing.md): no real model, server, container or trainer dependency; a
#: test running longer than the timeout fails, naming the test to mark slow
UNIT = ("-m", "not slow", "--hypothesis-profile=dev", "--timeout=60")
#: pytest-xdist for the full suite: 3 workers on the 2-core CI machine (with 2, a worker waiting
#: on a subprocess, a sandbox or a sleep left its core idle: the warm run took 1,983 s with 2,
#: 1,814 s with 3; docs/testing.md); pass ``-- -n N`` on a bigger one. The tests of one shared
#: server stay on one worker (``xdist_group``, see conftest.py)
WORKERS = ("-n", "3", "--dist", "loadgroup")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff lint + format check, and the package dependency rule (import-linter)."""
    session.run(*RUN, "ruff", "check", ".")
    session.run(*RUN, "ruff", "format", "--check", ".")
    # the trainer and the verifiers and tinker-cookbook adapters are not in the default sync;
    # import-linter only reads their sources
    session.run(*RUN, "lint-imports", "--no-cache", env={"PYTHONPATH": LINT_PATH})


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on every package and app (the trainer's dependencies installed first)."""
    session.run(*TRAINER_DEPS, external=True)
    session.run(*RAY_DEPS, external=True)
    session.run(*RUN, "mypy", *PACKAGES, "noxfile.py", "benchmarks")


@nox.session
def unit(session: nox.Session) -> None:
    """The fast tier for the inner loop: every test not marked slow (no trainer sync)."""
    session.run(*RUN, "pytest", *UNIT, *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The whole pytest suite (unit, integration, end to end) with the CI hypothesis profile,
    on three workers (the trainer's dependencies and Ray installed first: no-ops when they are)."""
    session.run(*TRAINER_DEPS, external=True)
    session.run(*RAY_DEPS, external=True)
    session.run(
        *RUN, "pytest", "--hypothesis-profile=ci", "--durations=40", *WORKERS, *session.posargs
    )


@nox.session
def e2e(session: nox.Session) -> None:
    """Only the end-to-end tests (real model, real sandboxes, real servers)."""
    session.run(*TRAINER_DEPS, external=True)
    session.run(*RAY_DEPS, external=True)
    session.run(*RUN, "pytest", "-m", "e2e", "--hypothesis-profile=ci", *WORKERS, *session.posargs)


@nox.session(name="llama_server")
def llama_server(session: nox.Session) -> None:
    """Build llama-server from the patched llama.cpp of third_party/llama-cpp-python (cached under
    ~/.cache/hermes-rl; ~12-16 min on 2 cores the first time), then run the tests against it."""
    session.run("bash", ".ci/llama-server.sh", external=True)
    session.run(
        *RUN,
        "pytest",
        "--hypothesis-profile=ci",
        "tests/test_llama_server_tokens.py",
        "tests/test_llama_server_fidelity.py",
        "tests/test_llama_server_batch.py",
        *session.posargs,
    )


@nox.session
def bench(session: nox.Session) -> None:
    """Run every benchmark script; each writes its section of docs/benchmarks.md."""
    session.run(*RUN, "python", "-m", "benchmarks", *session.posargs)


@nox.session
def ci(session: nox.Session) -> None:
    """Everything CI checks: lint, typecheck, tests."""
    session.notify("lint")
    session.notify("typecheck")
    session.notify("tests")
