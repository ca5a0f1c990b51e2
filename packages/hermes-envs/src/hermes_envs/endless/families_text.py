"""Text-processing families: sort/uniq, grep, sed, awk, head/tail, dedupe, word counts, and
writing given words to a file."""

from __future__ import annotations

import random
from collections import Counter

from hermes_envs.endless.task import Draft, FileEquals
from hermes_envs.endless.words import lines, size, words


def sort_unique(rng: random.Random, level: int) -> Draft:
    pool = words(rng, size(level, 6))
    data = [rng.choice(pool) for _ in range(size(level, 15))]
    reverse = level >= 3
    expected = sorted(set(data), reverse=reverse)
    order = "reverse alphabetical" if reverse else "alphabetical"
    return Draft(
        instruction=f"Write the distinct words of words.txt, one per line, in {order} order "
        f"(C locale), to unique.txt.",
        files={"words.txt": lines(data)},
        solution=f"LC_ALL=C sort -u {'-r ' if reverse else ''}words.txt > unique.txt",
        checks=[FileEquals("unique.txt", lines(expected))],
    )


def count_matches(rng: random.Random, level: int) -> Draft:
    levels = ["INFO", "WARN", "ERROR", "DEBUG"]
    target = rng.choice(levels)
    rows = [
        f"2024-01-{d:02d} {rng.choice(levels)} {w}"
        for d, w in enumerate(words(rng, size(level, 20)), start=1)
    ]
    rows.append(f"2024-02-01 {target} forced")
    count = sum(1 for r in rows if r.split()[1] == target)
    return Draft(
        instruction=f"Count the lines of app.log whose level (second field) is {target} and "
        f"write only the number to count.txt.",
        files={"app.log": lines(rows)},
        solution=f"awk '$2 == \"{target}\"' app.log | wc -l | tr -d ' ' > count.txt",
        checks=[FileEquals("count.txt", f"{count}\n".encode())],
    )


def replace_in_place(rng: random.Random, level: int) -> Draft:
    old, new = words(rng, 2, syllables=3)
    keys = words(rng, size(level, 4))
    body = [f"{k} = {old if i % 2 == 0 else rng.randint(1, 99)}" for i, k in enumerate(keys)]
    text = "[main]\n" + "\n".join(body) + f"\nowner = {old}-team\n"
    return Draft(
        instruction=f"In settings.ini replace every occurrence of '{old}' with '{new}' in place "
        f"(change nothing else).",
        files={"settings.ini": text},
        solution=f"sed -i 's/{old}/{new}/g' settings.ini",
        checks=[FileEquals("settings.ini", text.replace(old, new).encode(), strip=False)],
    )


def dedupe_ordered(rng: random.Random, level: int) -> Draft:
    pool = words(rng, size(level, 5))
    data = [rng.choice(pool) for _ in range(size(level, 14))]
    expected = list(dict.fromkeys(data))
    return Draft(
        instruction="Write the lines of input.txt to dedup.txt keeping only the first "
        "occurrence of each line, in their original order.",
        files={"input.txt": lines(data)},
        solution="awk '!seen[$0]++' input.txt > dedup.txt",
        checks=[FileEquals("dedup.txt", lines(expected))],
    )


def line_range(rng: random.Random, level: int) -> Draft:
    data = [f"line {i}: {w}" for i, w in enumerate(words(rng, size(level, 12)), start=1)]
    start = rng.randint(2, len(data) // 2)
    end = rng.randint(start + 1, len(data) - 1)
    return Draft(
        instruction=f"Write lines {start} to {end} (inclusive, 1-based) of book.txt to "
        f"excerpt.txt.",
        files={"book.txt": lines(data)},
        solution=f"sed -n '{start},{end}p' book.txt > excerpt.txt",
        checks=[FileEquals("excerpt.txt", lines(data[start - 1 : end]))],
    )


def word_frequency(rng: random.Random, level: int) -> Draft:
    pool = words(rng, size(level, 4))
    weights = list(range(1, len(pool) + 1))
    data = rng.choices(pool, weights=weights, k=size(level, 20))
    top = size(level, 2) if level < 3 else 3
    counts = Counter(data)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    expected = [f"{n} {w}" for w, n in ranked]
    text = " ".join(data) + "\n"
    return Draft(
        instruction=f"text.txt holds space-separated words. Write the {top} most frequent words "
        f"to top.txt as 'COUNT WORD' lines, highest count first, ties broken alphabetically.",
        files={"text.txt": text},
        solution=f"tr ' ' '\\n' < text.txt | grep -v '^$' | sort | uniq -c "
        f"| awk '{{print $1, $2}}' | LC_ALL=C sort -k1,1nr -k2,2 | head -n {top} > top.txt",
        checks=[FileEquals("top.txt", lines(expected))],
    )


def column_extract(rng: random.Random, level: int) -> Draft:
    ncols = 3 + level
    col = rng.randint(2, ncols)
    rows = [":".join(words(rng, ncols, syllables=1)) for _ in range(size(level, 6))]
    expected = [r.split(":")[col - 1] for r in rows]
    return Draft(
        instruction=f"records.txt has ':'-separated fields. Write field {col} of every line, "
        f"one per line, to field.txt.",
        files={"records.txt": lines(rows)},
        solution=f"cut -d: -f{col} records.txt > field.txt",
        checks=[FileEquals("field.txt", lines(expected))],
    )


def write_word(rng: random.Random, level: int) -> Draft:
    """The simplest tool use: put given words into a file (small models solve it sometimes,
    which is what a first RL run needs)."""
    target = rng.choice(["answer.txt", "word.txt", "out.txt"])
    first, second = words(rng, 2)
    if level == 1:
        instruction, expected = f"Write the word {first} to {target}.", [first]
    elif level == 2:
        instruction = f"Write the words {first} and {second}, one per line, to {target}."
        expected = [first, second]
    else:
        instruction = f"Write the word {first} in upper case to {target}."
        expected = [first.upper()]
    return Draft(
        instruction=instruction,
        files={},
        solution=f"printf '%s\\n' {' '.join(expected)} > {target}",
        checks=[FileEquals(target, lines(expected))],
    )
