#!/usr/bin/env bash
# Builds keel, starts keel-demo (a char transformer with the probe attached) and watches it.
# Extra arguments go to keel-demo, e.g.: scripts/demo.sh --inject-nan 300:blocks.1.mlp.fc.weight
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh"
bin="$root/build/bin"
endpoint="${KEEL_ENDPOINT:-tcp://127.0.0.1:5557}"

"$bin/keel-demo" --steps 0 --log-every 100 --endpoint "$endpoint" "$@" &
demo=$!
trap 'kill $demo 2>/dev/null || true' EXIT INT TERM

if [ -x "$bin/keel" ]; then
  "$bin/keel" --connect "$endpoint"
else
  # Until the dashboard is built, the headless client shows the live stream.
  "$bin/keel-cli" tail --endpoint "$endpoint" --timeout 30
fi
