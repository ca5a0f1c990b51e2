#!/bin/bash
wc -w < /app/essay.txt | tr -d ' ' > /app/count.txt
