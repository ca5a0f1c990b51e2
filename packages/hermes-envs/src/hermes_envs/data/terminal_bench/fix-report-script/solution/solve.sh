#!/bin/bash
sed -i 's/"ammount"/"amount"/' /app/report.py
python3 /app/report.py
