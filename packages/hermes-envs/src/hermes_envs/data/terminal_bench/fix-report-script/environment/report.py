import csv
import json

totals: dict[str, float] = {}
with open("/app/orders.csv", newline="") as handle:
    for row in csv.DictReader(handle):
        totals[row["customer"]] = totals.get(row["customer"], 0.0) + float(row["ammount"])

with open("/app/report.json", "w") as handle:
    json.dump(totals, handle, indent=2)
