import json
import pathlib
import subprocess
import sys

app = pathlib.Path("/app")
source = (app / "report.py").read_text()
if "15.5" in source or "8.0" in source:
    sys.exit("report.py hard-codes totals")
with open(app / "orders.csv", "a") as handle:
    handle.write("6,dee,1.25\n")
subprocess.run([sys.executable, str(app / "report.py")], check=True, cwd=app)
report = json.loads((app / "report.json").read_text())
expected = {"ada": 15.5, "bob": 8.0, "cy": 10.0, "dee": 1.25}
if report != expected:
    sys.exit(f"report.json is {report}, expected {expected}")
