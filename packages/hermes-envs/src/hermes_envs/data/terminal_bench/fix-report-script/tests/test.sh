#!/bin/bash
# No reward file: the exit code is the verdict (0 = pass).
set -e
python3 /tests/check_report.py
