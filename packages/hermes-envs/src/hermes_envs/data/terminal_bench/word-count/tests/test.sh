#!/bin/bash
# Harbor-style verifier: writes the reward to /logs/verifier/reward.txt.
mkdir -p /logs/verifier
expected="$(cat /tests/expected_count)"
if [ -f /app/count.txt ] && [ "$(tr -d ' \n' < /app/count.txt)" = "$expected" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
