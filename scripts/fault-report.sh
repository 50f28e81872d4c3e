#!/bin/sh
# Runs every dashboard-side fault against a live keel-demo and prints the table for
# RELIABILITY.md ("Faults and soak"). Usage: scripts/fault-report.sh [--long] (30 s faults).
# Builds keel-fault-report in build/ first; the dashboard's rows run under Xvfb.
set -e
cd "$(dirname "$0")/.."
nice -n 10 cmake --build build -j2 --target keel-fault-report keel
exec xvfb-run -a -s "-screen 0 1024x768x24" build/bin/keel-fault-report "$@"
