#!/usr/bin/env bash
# Prepares a folder to measure another commit of Shoal against this tree with
# `npm run bench -- <scenario> --against <dir>`: the commit's files (git archive, so the repository's
# worktrees are left alone), its commit id in <dir>/.commit, node_modules and bench/.cache linked to
# this tree's (same packages, same generated models), and its own dist/ built.
#
#   bash bench/tools/checkout.sh <commit> [dir]     # dir defaults to a new folder under $TMPDIR
#
# Prints the folder on its last line. Remove it with `rm -rf <dir>` when done.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd -P)
[ $# -ge 1 ] || { echo "usage: bash bench/tools/checkout.sh <commit> [dir]" >&2; exit 2; }
commit=$(git rev-parse --verify "$1^{commit}")
dir=${2:-$(mktemp -d "${TMPDIR:-/tmp}/shoal-${commit:0:7}-XXXX")}
mkdir -p "$dir"
[ -z "$(ls -A "$dir")" ] || { echo "$dir is not empty" >&2; exit 1; }
dir=$(cd "$dir" && pwd -P)
git archive "$commit" | tar -x -C "$dir"
echo "$commit" >"$dir/.commit"
ln -s "$(readlink -f node_modules)" "$dir/node_modules"
mkdir -p bench/.cache
ln -s "$root/bench/.cache" "$dir/bench/.cache"
(cd "$dir" && npm run build >/dev/null)
echo "built $commit in:" >&2
echo "$dir"
