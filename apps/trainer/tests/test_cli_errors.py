"""Bad options, as a user types them: one line on stderr naming the option, exit code 2, in
seconds (before the weights, the model or a sandbox load), and no traceback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hermes_trainer.config import TrainConfig, config_record
from hermes_trainer.lora import write_gguf_adapter
from hermes_trainer.optimizer import OptimizerSpec

pytestmark = pytest.mark.slow  # the trainer's dependencies (JAX)

TRAINER = Path(__file__).resolve().parents[1]
#: a process that loads nothing answers in seconds (a source gets 10 s to listen); loading the
#: weights alone takes 70 s here
QUICK_S = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _cases(tmp: Path) -> dict[str, tuple[list[str], str]]:
    existing = tmp / "a-file"
    existing.write_text("not a directory\n")
    run = ["--output", str(tmp / "run")]
    return {
        "negative eval items": (["--eval-items", "-1", "--steps", "1", *run], "--eval-items"),
        "steps 0 without an evaluation": (["--steps", "0", *run], "--steps 0"),
        "negative steps": (["--steps", "-1", *run], "--steps"),
        "overlap of another source": (
            ["--overlap", "--trajectories", str(tmp), *run],
            "--overlap",
        ),
        "output under /proc": (["--output", "/proc/x"], "--output"),
        "output is a file": (["--output", str(existing)], "--output"),
        # sysfs refuses new files even to root, where a chmod-ed directory would not
        "output read-only": (["--output", "/sys"], "--output"),
        "missing run dir": (["--trajectories", str(tmp / "no-run"), *run], "--trajectories"),
        "unreachable run-api": (
            ["--atropos-url", f"http://127.0.0.1:{_free_port()}", *run],
            "--atropos-url",
        ),
        "group size 1": (["--group-size", "1", *run], "--group-size"),
        "ray without its cluster": (["--sandbox", "ray", *run], "--ray-address"),
        "sandbox of another source": (
            ["--sandbox", "docker", "--trajectories", str(tmp), *run],
            "--sandbox",
        ),
        "adapter dir missing": (["--adapter", str(tmp / "no/dir/a.gguf"), *run], "--adapter"),
        "adapter dir read-only": (["--adapter", "/sys/adapter.gguf", *run], "--adapter"),
        "resume without output": (["--resume"], "--resume needs --output"),
        "resume without a run": (["--resume", *run], "--resume"),
        "resume with other options": (
            ["--resume", "--output", str(_recorded_run(tmp / "hot", temperature=0.5))],
            "--temperature: recorded 0.5, given 1.0",
        ),
        "output holds a run": (
            ["--output", str(_recorded_run(tmp / "started"))],
            "--resume continues it",
        ),
        "unknown logger": (["--log-to", "tensorboard,mlflow", *run], "--log-to"),
        "eval every without eval items": (["--eval-every", "2", *run], "--eval-every"),
        "init adapter missing": (["--init-adapter", str(tmp / "no.gguf"), *run], "--init-adapter"),
        "init adapter not a gguf": (["--init-adapter", str(existing), *run], "--init-adapter"),
        "init adapter of another rank": (
            ["--init-adapter", str(_adapter(tmp / "rank4.gguf")), *run],
            "pass --lora-rank 4 --lora-alpha 8",
        ),
        "negative clip eps": (["--clip-eps", "-0.1", *run], "--clip-eps"),
        "bad loss norm": (["--loss-norm", "mean", *run], "--loss-norm"),
        "warmup past the run": (["--warmup-steps", "5", "--steps", "5", *run], "--warmup-steps"),
        "more minibatches than groups": (
            ["--minibatches", "5", "--groups-per-step", "4", *run],
            "--minibatches",
        ),
        "passes of 0": (["--passes", "0", *run], "--passes"),
        "negative kl coef": (["--kl-coef", "-1", *run], "--kl-coef"),
        "knob with tinker": (
            ["--kl-coef", "0.1", "--tinker-model", "m", "--temperature", "1", *run],
            "--kl-coef",
        ),
        "resume with a longer decaying schedule": (
            [
                "--resume",
                "--steps",
                "30",
                "--lr-schedule",
                "cosine",
                "--output",
                str(_recorded_run(tmp / "cosine", optimizer=OptimizerSpec(lr_schedule="cosine"))),
            ],
            "--steps: recorded 20, given 30",
        ),
        "keep activations with tinker": (
            ["--keep-activations", "--tinker-model", "m", *run],
            "--keep-activations",
        ),
        "init adapter with tinker": (
            ["--init-adapter", str(_adapter(tmp / "t.gguf")), "--tinker-model", "m", *run],
            "--init-adapter",
        ),
    }


def _adapter(path: Path) -> Path:
    """A rank-4, alpha-8 LoRA adapter GGUF (one layer of one projection)."""
    pair = (np.zeros((1, 4, 16), np.float32), np.zeros((1, 8, 4), np.float32))
    return write_gguf_adapter(path, {"attn_q": pair}, alpha=8.0)


def _recorded_run(output: Path, **options: Any) -> Path:
    """A run directory with its run.json and a metrics line, as a started run leaves it."""
    output.mkdir()
    record = config_record(TrainConfig(output=output, **options))
    (output / "run.json").write_text(json.dumps(record), encoding="utf-8")
    (output / "metrics.jsonl").write_text("{}\n", encoding="utf-8")
    return output


CASES = (
    "negative eval items",
    "output under /proc",
    "output is a file",
    "output read-only",
    "missing run dir",
    "unreachable run-api",
    "group size 1",
    "adapter dir missing",
    "adapter dir read-only",
    "resume without output",
    "resume without a run",
    "resume with other options",
    "output holds a run",
    "ray without its cluster",
    "sandbox of another source",
    "unknown logger",
    "eval every without eval items",
    "init adapter missing",
    "init adapter not a gguf",
    "init adapter of another rank",
    "init adapter with tinker",
    "keep activations with tinker",
    "negative clip eps",
    "bad loss norm",
    "warmup past the run",
    "more minibatches than groups",
    "passes of 0",
    "negative kl coef",
    "knob with tinker",
    "resume with a longer decaying schedule",
    "steps 0 without an evaluation",
    "negative steps",
    "overlap of another source",
)


@pytest.mark.parametrize("case", CASES)
def test_a_bad_option_is_one_line_naming_it_before_anything_loads(
    case: str, tmp_path: Path
) -> None:
    argv, option = _cases(tmp_path)[case]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(TRAINER), *argv, "--no-progress"],
        capture_output=True,
        text=True,
        timeout=40,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert option in line
    assert elapsed < QUICK_S, f"{elapsed:.0f} s: something loaded before the options were checked"
    assert not (tmp_path / "run").exists()


def test_the_option_checks_load_none_of_the_learners_libraries() -> None:
    """Before the options hold, the command line loads no JAX, optax, matplotlib or Tinker SDK
    (they were 1.4 s of a bad option's 2.1 s answer, before every check of every run)."""
    heavy = ("jax", "optax", "matplotlib", "tinker")
    script = (
        "import runpy, sys\n"
        f"sys.argv = [{str(TRAINER)!r}, '--steps', '-1', '--no-progress']\n"
        "try:\n"
        f"    runpy.run_path({str(TRAINER)!r}, run_name='__main__')\n"
        "except SystemExit as stop:\n"
        f"    print(stop.code, sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "--steps" in done.stderr
    assert done.stdout.split() == ["2", "[]"], done.stdout
