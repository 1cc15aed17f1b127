#!/usr/bin/env bash
# valgrind memcheck over what runs inside slurmstepd and what reads users' files: the plugin's
# facade and launch-style tests (the same C++ the plugin runs), and the topo-aware CLI over every
# fixture the project has (node captures, fabric dumps, Slurm topology files, shadow logs) and a
# map/inspect round trip. Any error or definite leak fails (exit 1) and names the run.
# Usage: scripts/valgrind.sh [BUILD_DIR]   (a release build: build/release by default)
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build/release}" && pwd)
command -v valgrind >/dev/null || { echo "valgrind: not installed (apt-get install valgrind)" >&2; exit 77; }
cli=$build/tools/topo-aware
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
vg=(valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite --track-origins=no)
runs=0 failed=0
run() {  # name, command...
  local name=$1; shift
  runs=$((runs + 1))
  "${vg[@]}" --log-file="$out/vg.log" "$@" >"$out/stdout" 2>"$out/stderr"
  if [ $? -eq 99 ] || [ -s "$out/vg.log" ]; then
    failed=$((failed + 1))
    echo "valgrind: FAIL: $name"
    sed 's/^/  /' "$out/vg.log" | head -30
  fi
}
fx=$here/tests/fixtures
for f in "$fx"/nccl-topo/*.xml "$fx"/hwloc/*.xml; do
  run "discover -i ${f#$fx/}" "$cli" discover -i "$f" --of json
  run "nccl-topo -i ${f#$fx/}" "$cli" nccl-topo -i "$f" -o "$out/x.xml"
done
for f in "$fx"/ibnetdiscover/*.txt "$fx"/slurm-topology/*.conf "$here"/etc/*.toml; do
  case $f in */topo-aware.toml) continue ;; esac
  run "fabric -i ${f#$here/}" "$cli" fabric -i "$f" --of json
done
run "map (lab cluster, json)" "$cli" map --fabric "$here/etc/lab-cluster.toml" --nodes 'node[1-4]' \
  --node-type "$fx/nccl-topo/dgx-h100-topo.xml" --layout tp=8,pp=2 --of json -o "$out/plan.json"
run "inspect --svg" "$cli" inspect "$out/plan.json" --svg "$out/plan.svg"
run "map per-node launcher" "$cli" map --fabric "$here/tests/e2e/lab-crossed.toml" \
  --nodes 'node[1-4]' --launcher per-node --layout tp=8 --of env
for f in "$fx"/shadow/*.log; do
  run "shadow-report --lenient ${f#$fx/}" "$cli" shadow-report --lenient --of json "$f"
done
run "spank facade and launch-style tests" "$build/tests/spank/spank_facade_test"
echo "valgrind: $runs runs, $failed failed"
[ $failed -eq 0 ]
