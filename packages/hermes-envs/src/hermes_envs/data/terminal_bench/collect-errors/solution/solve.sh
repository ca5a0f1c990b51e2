#!/bin/bash
cat /app/logs/*.log | grep ERROR | sort > /app/errors.txt
