"""File-system families: renames, trees, archives, permissions, find, symlinks."""

from __future__ import annotations

import random

from hermes_envs.endless.task import Check, CommandOutput, Draft, FileEquals, FileMode, PathMissing
from hermes_envs.endless.words import lines, size, words


def rename_extension(rng: random.Random, level: int) -> Draft:
    names = words(rng, size(level, 3))
    files = {f"notes/{n}.txt": f"{n} body\n" for n in names}
    files["notes/keep.csv"] = "a,b\n"
    checks: list[Check] = [FileEquals(f"notes/{n}.md", f"{n} body\n".encode()) for n in names]
    checks += [PathMissing(f"notes/{n}.txt") for n in names]
    checks.append(FileEquals("notes/keep.csv", b"a,b\n"))
    return Draft(
        instruction="Rename every .txt file in notes/ to the same name with a .md extension. "
        "Leave other files alone.",
        files=files,
        solution='for f in notes/*.txt; do mv -- "$f" "${f%.txt}.md"; done',
        checks=checks,
    )


def make_tree(rng: random.Random, level: int) -> Draft:
    parts = words(rng, size(level, 3), syllables=1)
    paths = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    marker = words(rng, 1, syllables=3)[0]
    leaf = paths[-1]
    return Draft(
        instruction=f"Create the nested directory {leaf}/ (all parents included) and inside it a "
        f"file README containing exactly the line '{marker}'.",
        files={"placeholder.txt": "ignore me\n"},
        solution=f"mkdir -p {leaf} && echo {marker} > {leaf}/README",
        checks=[FileEquals(f"{leaf}/README", f"{marker}\n".encode())],
    )


def make_archive(rng: random.Random, level: int) -> Draft:
    names = sorted(words(rng, size(level, 3)))
    files = {f"project/{n}.txt": f"{n}\n" for n in names}
    listing = sorted(["project/", *[f"project/{n}.txt" for n in names]])
    return Draft(
        instruction="Create a gzip-compressed tar archive project.tar.gz containing the "
        "directory project/ (paths inside the archive start with project/).",
        files=files,
        solution="tar -czf project.tar.gz project",
        checks=[CommandOutput("tar -tzf project.tar.gz | LC_ALL=C sort", "\n".join(listing))],
    )


def extract_archive(rng: random.Random, level: int) -> Draft:
    names = words(rng, size(level, 3))
    secret = words(rng, 1, syllables=3)[0]
    files = {f"bundle/{n}.txt": f"{n}-{secret}\n" for n in names}
    setup = "tar -cjf bundle.tar.bz2 bundle && rm -r bundle"
    return Draft(
        instruction="Extract bundle.tar.bz2 into a new directory out/ (so its files end up "
        "under out/bundle/).",
        files=files,
        solution="mkdir -p out && tar -xjf bundle.tar.bz2 -C out",
        checks=[FileEquals(f"out/bundle/{n}.txt", f"{n}-{secret}\n".encode()) for n in names],
        setup_script=setup,
    )


def permissions(rng: random.Random, level: int) -> Draft:
    scripts = words(rng, size(level, 2))
    files = {f"bin/{s}.sh": f"#!/bin/sh\necho {s}\n" for s in scripts}
    files["secret.key"] = words(rng, 1, syllables=4)[0]
    checks = [FileMode(f"bin/{s}.sh", 0o755) for s in scripts]
    checks.append(FileMode("secret.key", 0o600))
    return Draft(
        instruction="Make every .sh file in bin/ mode 755 and make secret.key readable and "
        "writable by its owner only (mode 600).",
        files=files,
        solution="chmod 755 bin/*.sh && chmod 600 secret.key",
        checks=checks,
        setup_script="chmod 644 bin/*.sh secret.key",
    )


def find_large(rng: random.Random, level: int) -> Draft:
    names = words(rng, size(level, 4))
    limit = 1000
    files: dict[str, bytes | str] = {}
    big: list[str] = []
    for i, n in enumerate(names):
        path = f"data/{'sub/' if i % 2 else ''}{n}.bin"
        large = i % 3 == 0 or i == 1
        files[path] = bytes(rng.getrandbits(8) for _ in range(limit + 200 if large else 300))
        if large:
            big.append(path)
    return Draft(
        instruction=f"List every regular file under data/ larger than {limit} bytes as paths "
        f"relative to the current directory (like data/x.bin), sorted (C locale), one per "
        f"line, in big.txt.",
        files=files,
        solution=f"find data -type f -size +{limit}c | LC_ALL=C sort > big.txt",
        checks=[FileEquals("big.txt", lines(sorted(big)))],
    )


def grep_recursive(rng: random.Random, level: int) -> Draft:
    token = "TODO-" + words(rng, 1)[0].upper()
    names = words(rng, size(level, 4))
    files: dict[str, bytes | str] = {}
    hits: list[str] = []
    for i, n in enumerate(names):
        path = f"src/{'pkg/' if i % 2 else ''}{n}.py"
        has = i % 2 == 0 or i == len(names) - 1
        files[path] = f"x = {i}\n" + (f"# {token}: fix\n" if has else "# fine\n")
        if has:
            hits.append(path)
    return Draft(
        instruction=f"Write the paths of all files under src/ that contain the string {token}, "
        f"sorted (C locale), one per line (like src/a.py), to hits.txt.",
        files=files,
        solution=f"grep -rl -- {token} src | LC_ALL=C sort > hits.txt",
        checks=[FileEquals("hits.txt", lines(sorted(hits)))],
    )


def symlink_latest(rng: random.Random, level: int) -> Draft:
    versions = sorted({f"v{rng.randint(1, 9)}.{rng.randint(0, 20)}" for _ in range(level * 3)})
    versions = sorted(versions, key=lambda v: tuple(int(x) for x in v[1:].split(".")))
    files = {f"releases/{v}/VERSION": f"{v}\n" for v in versions}
    return Draft(
        instruction="Create a symbolic link named current pointing to releases/<newest version> "
        "(versions compare numerically, e.g. v1.10 is newer than v1.9). Use a relative link "
        "target.",
        files=files,
        solution=f"ln -s releases/{versions[-1]} current",
        checks=[
            CommandOutput("readlink current", f"releases/{versions[-1]}"),
            FileEquals("current/VERSION", f"{versions[-1]}\n".encode()),
        ],
    )
