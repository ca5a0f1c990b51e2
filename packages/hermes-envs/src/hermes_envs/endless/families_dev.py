"""Developer families: git operations, shell scripts, small Python fixes, env files."""

from __future__ import annotations

import random

from hermes_envs.endless.task import CommandOutput, Draft, FileEquals
from hermes_envs.endless.words import lines, size, words

_GIT = "git -c user.name=hermes -c user.email=hermes@example.invalid"
_INIT_REPO = f"git init -q repo && cd repo && {_GIT} add -A && {_GIT} commit -qm initial"


def git_commit(rng: random.Random, level: int) -> Draft:
    name, text = words(rng, 2)
    message = f"Add {name} notes"
    return Draft(
        instruction=f"repo/ is a git repository. Create repo/{name}.md containing the line "
        f"'{text}' and commit it with the message '{message}'. Leave the working tree clean.",
        files={"repo/README": "readme\n"},
        setup_script=_INIT_REPO,
        solution=f"cd repo && echo {text} > {name}.md && {_GIT} add {name}.md "
        f"&& {_GIT} commit -qm '{message}'",
        checks=[
            CommandOutput("git -C repo log -1 --format=%s", message),
            CommandOutput(f"git -C repo show HEAD:{name}.md", text),
            CommandOutput("git -C repo status --porcelain | wc -l", "0"),
        ],
    )


def git_branch(rng: random.Random, level: int) -> Draft:
    branch = "feature/" + words(rng, 1)[0]
    return Draft(
        instruction=f"In the git repository repo/, create a branch named {branch} from the "
        f"current commit and switch to it.",
        files={"repo/main.txt": "main\n"},
        setup_script=_INIT_REPO,
        solution=f"git -C repo checkout -q -b {branch}",
        checks=[
            CommandOutput("git -C repo rev-parse --abbrev-ref HEAD", branch),
            CommandOutput(f"git -C repo rev-parse {branch}^{{commit}} >/dev/null && echo ok", "ok"),
        ],
    )


def git_revert_file(rng: random.Random, level: int) -> Draft:
    good = lines(words(rng, size(level, 3)))
    return Draft(
        instruction="In repo/, config.txt has uncommitted edits. Discard them so config.txt "
        "matches the last commit again.",
        files={"repo/config.txt": good},
        setup_script=_INIT_REPO + " && echo broken >> config.txt",
        solution="git -C repo checkout -- config.txt",
        checks=[
            FileEquals("repo/config.txt", good, strip=False),
            CommandOutput("git -C repo diff --stat -- config.txt | wc -l", "0"),
        ],
    )


def shell_script(rng: random.Random, level: int) -> Draft:
    greeting = rng.choice(["Hello", "Hi", "Welcome"])
    probe = words(rng, 1)[0]
    return Draft(
        instruction=f"Write an executable shell script greet.sh that prints '{greeting}, NAME!' "
        f"where NAME is its first argument (e.g. ./greet.sh Ada prints '{greeting}, Ada!').",
        files={"NOTES": "write greet.sh here\n"},
        solution=f"printf '#!/bin/sh\\necho \"{greeting}, $1!\"\\n' > greet.sh "
        "&& chmod +x greet.sh",
        checks=[CommandOutput(f"./greet.sh {probe}", f"{greeting}, {probe}!")],
    )


def python_fix(rng: random.Random, level: int) -> Draft:
    values = [rng.randint(1, 50) for _ in range(size(level, 4))]
    expected = sum(v * v for v in values)
    code = (
        "def sum_of_squares(values):\n"
        "    total = 0\n"
        "    for v in values[1:]:\n"
        "        total += v * v\n"
        "    return total\n\n\n"
        f"print(sum_of_squares({values!r}))\n"
    )
    return Draft(
        instruction="squares.py should print the sum of the squares of its list but prints a "
        "wrong number. Fix the bug in sum_of_squares (do not hard-code the answer).",
        files={"squares.py": code},
        solution="sed -i 's/values\\[1:\\]/values/' squares.py",
        checks=[
            CommandOutput("python3 squares.py", str(expected)),
            CommandOutput(
                "python3 -c \"exec(open('squares.py').read().split('print(')[0]); "
                'print(sum_of_squares([3, 4]))"',
                "25",
            ),
        ],
    )


def env_merge(rng: random.Random, level: int) -> Draft:
    keys = words(rng, size(level, 4), syllables=1)
    base = {k.upper(): str(rng.randint(1, 9)) for k in keys}
    override = {k: str(int(v) + 10) for k, v in list(base.items())[::2]}
    merged = {**base, **override}
    return Draft(
        instruction="Merge base.env and override.env (KEY=VALUE lines) into merged.env: every "
        "key from both, the override value winning, sorted by key (C locale).",
        files={
            "base.env": lines([f"{k}={v}" for k, v in base.items()]),
            "override.env": lines([f"{k}={v}" for k, v in override.items()]),
        },
        solution="cat override.env base.env | awk -F= '!seen[$1]++' | LC_ALL=C sort > merged.env",
        checks=[FileEquals("merged.env", lines([f"{k}={merged[k]}" for k in sorted(merged)]))],
    )
