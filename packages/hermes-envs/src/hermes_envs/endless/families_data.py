"""Structured-data families: CSV and JSON transforms, log analysis."""

from __future__ import annotations

import json
import random
from collections import Counter

from hermes_envs.endless.task import Draft, FileEquals, JsonEquals
from hermes_envs.endless.words import lines, size, words


def _table(rng: random.Random, level: int) -> tuple[list[str], list[list[str]]]:
    cities = words(rng, 3)
    header = ["id", "name", "city", "amount"]
    rows = [
        [str(i), n, rng.choice(cities), str(rng.randint(1, 500))]
        for i, n in enumerate(words(rng, size(level, 6)), start=1)
    ]
    return header, rows


def _csv(header: list[str], rows: list[list[str]]) -> bytes:
    return lines([",".join(header), *(",".join(r) for r in rows)])


def csv_sum(rng: random.Random, level: int) -> Draft:
    header, rows = _table(rng, level)
    total = sum(int(r[3]) for r in rows)
    return Draft(
        instruction="sales.csv has a header row. Write the sum of the amount column to "
        "total.txt (just the number).",
        files={"sales.csv": _csv(header, rows)},
        solution="awk -F, 'NR>1 {s += $4} END {print s}' sales.csv > total.txt",
        checks=[FileEquals("total.txt", f"{total}\n".encode())],
    )


def csv_filter(rng: random.Random, level: int) -> Draft:
    header, rows = _table(rng, level)
    city = rows[0][2]
    kept = [r for r in rows if r[2] == city]
    return Draft(
        instruction=f"Write to {city}.csv the header of people.csv followed by only the rows "
        f"whose city is {city}, in their original order.",
        files={"people.csv": _csv(header, rows)},
        solution=f"awk -F, 'NR==1 || $3 == \"{city}\"' people.csv > {city}.csv",
        checks=[FileEquals(f"{city}.csv", _csv(header, kept))],
    )


def csv_to_json(rng: random.Random, level: int) -> Draft:
    header, rows = _table(rng, level)
    value = [{"id": int(r[0]), "name": r[1], "city": r[2], "amount": int(r[3])} for r in rows]
    return Draft(
        instruction="Convert people.csv into people.json: a JSON array with one object per "
        "row, keys from the header, and id and amount as integers.",
        files={"people.csv": _csv(header, rows)},
        solution=(
            "python3 - <<'PY'\nimport csv, json\nrows = list(csv.DictReader(open('people.csv')))\n"
            "for r in rows:\n    r['id'] = int(r['id']); r['amount'] = int(r['amount'])\n"
            "json.dump(rows, open('people.json', 'w'))\nPY"
        ),
        checks=[JsonEquals("people.json", value)],
    )


def json_extract(rng: random.Random, level: int) -> Draft:
    names_all = words(rng, size(level, 5))
    active = [i == 0 or rng.random() < 0.5 for i in range(len(names_all))]
    users = [
        {"name": n, "active": a, "age": rng.randint(18, 80)}
        for n, a in zip(names_all, active, strict=True)
    ]
    names = sorted(n for n, a in zip(names_all, active, strict=True) if a)
    return Draft(
        instruction='users.json holds {"users": [...]}. Write the names of the active users, '
        "sorted, one per line, to active.txt.",
        files={"users.json": json.dumps({"users": users}, indent=2)},
        solution=(
            "python3 -c \"import json; u = json.load(open('users.json'))['users']; "
            "print('\\n'.join(sorted(x['name'] for x in u if x['active'])))\" > active.txt"
        ),
        checks=[FileEquals("active.txt", lines(names))],
    )


def json_group(rng: random.Random, level: int) -> Draft:
    _header, rows = _table(rng, level)
    totals: dict[str, int] = {}
    for r in rows:
        totals[r[2]] = totals.get(r[2], 0) + int(r[3])
    orders = [{"city": r[2], "amount": int(r[3])} for r in rows]
    return Draft(
        instruction="orders.json is a list of {city, amount}. Write totals.json: an object "
        "mapping each city to the sum of its amounts.",
        files={"orders.json": json.dumps(orders)},
        solution=(
            "python3 - <<'PY'\nimport json\nt = {}\nfor o in json.load(open('orders.json')):\n"
            "    t[o['city']] = t.get(o['city'], 0) + o['amount']\n"
            "json.dump(t, open('totals.json', 'w'))\nPY"
        ),
        checks=[JsonEquals("totals.json", totals)],
    )


def top_ip(rng: random.Random, level: int) -> Draft:
    ips = [f"10.0.{rng.randint(0, 9)}.{rng.randint(1, 254)}" for _ in range(4 + level)]
    ips = list(dict.fromkeys(ips))
    hits = [rng.choice(ips) for _ in range(size(level, 20))]
    winner = ips[0]
    hits += [winner] * (max(Counter(hits).values()) + 1)
    rng.shuffle(hits)
    log = [
        f'{ip} - - [01/Jan/2024:00:00:{i % 60:02d}] "GET / HTTP/1.1" 200 {i}'
        for i, ip in enumerate(hits)
    ]
    return Draft(
        instruction="Write the client IP address (first field) that appears most often in "
        "access.log to top_ip.txt.",
        files={"access.log": lines(log)},
        solution="awk '{print $1}' access.log | sort | uniq -c | sort -rn | head -n1 "
        "| awk '{print $2}' > top_ip.txt",
        checks=[FileEquals("top_ip.txt", f"{winner}\n".encode())],
    )


def status_counts(rng: random.Random, level: int) -> Draft:
    codes = [200, 201, 301, 404, 500][: 2 + level]
    hits = [rng.choice(codes) for _ in range(size(level, 20))]
    log = [f'10.0.0.1 - - [x] "GET /{i} HTTP/1.1" {c} 12' for i, c in enumerate(hits)]
    counts = sorted(Counter(hits).items())
    return Draft(
        instruction="In access.log the HTTP status code is the second-to-last field of each "
        "line. Write one 'CODE COUNT' line per status code, sorted by code ascending, to "
        "status.txt.",
        files={"access.log": lines(log)},
        solution="awk '{c[$(NF-1)]++} END {for (k in c) print k, c[k]}' access.log "
        "| sort -n > status.txt",
        checks=[FileEquals("status.txt", lines([f"{c} {n}" for c, n in counts]))],
    )
