#!/usr/bin/env bash
# The model scenario with a core to spare: one Shoal worker whose thread has core 1 to itself,
# while the HTTP thread, V8's helpers and wrk share core 0; against the in-process limit of one
# session of 1 thread on core 1. Each round measures the limit, then Shoal with JSON bodies, then
# with MessagePack bodies, and prints the ratios.
#
#   bash bench/tools/spare-core.sh [rounds=3] [connections=64] [seconds=10]
#
# Needs a machine with 2 cores or more, taskset, wrk and curl; `npm run build` and one run of
# `npm run bench -- model` first (for bench/.cache/mlp-big.onnx and its MessagePack request).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
conns=${2:-64}
secs=${3:-10}
model=bench/.cache/mlp-big.onnx
binary=bench/.cache/model-big-request.msgpack
[ -f "$model" ] && [ -f "$binary" ] || { echo "run 'npm run bench -- model' once first: $model and $binary are missing" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores or more" >&2; exit 1; }
json=$(node -e 'const row = Array.from({ length: 1024 }, (_, i) => ((i * 7) % 10) / 10); process.stdout.write(JSON.stringify({ input: [row] }))')
port=$((20000 + RANDOM % 20000))

load() { # format seconds
  if [ "$1" = mp ]; then
    WRK_BODY_FILE=$binary WRK_CONTENT_TYPE=application/msgpack taskset -c 0 wrk -t1 -c"$conns" -d"$2"s -s bench/lua/post-file.lua "http://127.0.0.1:$port/inference"
  else
    WRK_BODY=$json taskset -c 0 wrk -t1 -c"$conns" -d"$2"s -s bench/lua/post-json.lua "http://127.0.0.1:$port/inference"
  fi
}

shoal() { # format -> req/s
  port=$((port + 1))
  taskset -c 0 node dist/cli/main.js serve "$model" --num 1 --intra-op-threads 1 --max-batch-size 32 --max-wait-ms 5 \
    --port "$port" --address 127.0.0.1 --log-level warn > /dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 1 120); do curl -sf "127.0.0.1:$port/readyz" > /dev/null && break; sleep 0.5; done
  load "$1" 3 > /dev/null
  # The worker thread is the one that has run the model: the busiest. It alone moves to core 1.
  local tid
  tid=$(for t in /proc/$pid/task/*; do echo "$(awk '{print $14 + $15}' "$t/stat") $(basename "$t")"; done | sort -n | tail -1 | cut -d' ' -f2)
  taskset -pc 1 "$tid" > /dev/null
  load "$1" 3 > /dev/null
  load "$1" "$secs" | awk '/Requests\/sec/ {print $2}'
  kill -TERM "$pid"
  wait "$pid" || true
}

echo "round  limit (samples/s)  shoal JSON (req/s)  ratio  shoal MessagePack (req/s)  ratio"
for round in $(seq 1 "$rounds"); do
  limit=$(taskset -c 1 node bench/servers/onnx-limit.mjs --model "$model" --batch 32 --sessions 1 --threads 1 --seconds 5 | node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(Math.round(JSON.parse(s).samplesPerSec)))')
  j=$(shoal json)
  m=$(shoal mp)
  awk -v r="$round" -v l="$limit" -v j="$j" -v m="$m" 'BEGIN { printf "%5d  %17d  %18.0f  %4.1f%%  %25.0f  %4.1f%%\n", r, l, j, 100 * j / l, m, 100 * m / l }'
done
