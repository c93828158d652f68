#!/usr/bin/env bash
# Two trees' echo servers measured at the same moment: both on core 0, sharing it, each driven by
# its own wrk on core 1 at the same load. A VM whose speed drifts from one minute to the next moves
# both alike, so the CPU time per request of one against the other holds where back-to-back points
# (`npm run bench -- echo --against`) scatter by ±25 %. Each round prints both trees' requests and
# CPU µs per request (all threads, from /proc) and the ratios A/B.
#
#   bash bench/tools/duel.sh <treeA> <treeB> [connections 32] [seconds 15] [rounds 3]
#   DUEL_RUNTIME=bun bash bench/tools/duel.sh ...    # both servers on Bun (runtimes/node_modules/.bin/bun)
#   DUEL_ENV_A="OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_TRACES_SAMPLER_ARG=0.01" bash bench/tools/duel.sh . . ...
#                                                    # A alone with these variables (e.g. tracing on; bench/tools/otlp-sink.ts receives)
#   DUEL_ENV_B=...                                   # likewise for B
#
# A tree is a checkout with node_modules and dist/ (bench/tools/checkout.sh makes one).
set -euo pipefail
A=$1 B=$2 C=${3:-32} S=${4:-15} R=${5:-3}
lua="$(cd "$(dirname "$0")/.." && pwd)/lua/post-json.lua"
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ "${DUEL_RUNTIME:-node}" = bun ]; then run=("$root/runtimes/node_modules/.bin/bun"); else run=(node --import tsx); fi
start() { (cd "$1" && exec env $3 taskset -c 0 "${run[@]}" bench/servers/shoal-exp.ts --num 1 --port "$2" --address 127.0.0.1 --log-level warn --log-format json) >/dev/null 2>&1 & echo $!; }
pa=$(start "$A" 42001 "${DUEL_ENV_A:-}")
pb=$(start "$B" 42002 "${DUEL_ENV_B:-}")
trap 'kill $pa $pb 2>/dev/null' EXIT
for port in 42001 42002; do
  for _ in $(seq 300); do curl -s -o /dev/null -X POST -H 'content-type: application/json' -d '{"x":2}' "http://127.0.0.1:$port/inference" && break; sleep 0.2; done
done
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
load() { taskset -c 1 wrk -t1 -c"$C" -d"$1"s -s "$lua" "http://127.0.0.1:$2/inference"; }
# Warm-up, both at once.
load 3 42001 >/dev/null & w=$!; load 3 42002 >/dev/null; wait $w
hz=$(getconf CLK_TCK)
for r in $(seq "$R"); do
  a0=$(cpu "$pa"); b0=$(cpu "$pb")
  load "$S" 42001 >/tmp/duel-a.$$ & w=$!
  load "$S" 42002 >/tmp/duel-b.$$
  wait $w
  a1=$(cpu "$pa"); b1=$(cpu "$pb")
  na=$(awk '/requests in/ {print $1}' /tmp/duel-a.$$); nb=$(awk '/requests in/ {print $1}' /tmp/duel-b.$$)
  awk -v r="$r" -v na="$na" -v nb="$nb" -v ca="$((a1 - a0))" -v cb="$((b1 - b0))" -v hz="$hz" 'BEGIN {
    ua = ca * 1e6 / hz / na; ub = cb * 1e6 / hz / nb
    printf "round %d: A %d req, %.1f us/req | B %d req, %.1f us/req | A/B req %.3f, CPU per request %.3f\n", r, na, ua, nb, ub, na / nb, ua / ub
  }'
done
rm -f /tmp/duel-a.$$ /tmp/duel-b.$$
