#!/usr/bin/env bash
# etc/cli_filter.lua without Slurm: the script loaded by a plain Lua interpreter with a stand-in
# `slurm` table and options table, and a stand-in `topo-aware` that answers as `place --of
# sbatch` does. What a job that asks gets (--nodelist, --exclude), the arguments the tool is given
# (quoted: a layout cannot run a command), and every fail-open case: the job's options untouched,
# exactly one line on stderr. The lab's sbatch runs the same script for real
# (tests/e2e/placement.sh). Exit 77 without a Lua interpreter (apt-get install lua5.1: Debian's
# Slurm 22.05 embeds Lua 5.1).
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LUA=""
for l in lua5.1 lua5.3 lua5.4 lua; do command -v "$l" >/dev/null && { LUA=$l; break; }; done
[ -n "$LUA" ] || { echo "SKIP: no Lua interpreter (apt-get install lua5.1)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

mkdir -p "$tmp/etc"
echo 'fabric = "fabric.toml"  # relative to this file' >"$tmp/etc/topo-aware.toml"
cat >"$tmp/topo-aware" <<EOF
#!/bin/sh
for a in "\$@"; do printf '[%s]' "\$a"; done >"$tmp/args"
case \$FAKE in
  pin) echo "--nodelist=node[2,4]" ;;
  exclude) echo "--exclude=node[1,3] --switches=1" ;;
  other) echo "--nodelist=node1 --begin=now+1hour" ;;
  refuse) echo "topo-aware place: cannot place now: 3 hosts asked, 2 free" >&2; exit 5 ;;
  slow) sleep 10 ;;
esac
EOF
chmod 0755 "$tmp/topo-aware"
# Runs the filter on options given as KEY VALUE pairs; prints nodelist/exclude as it left them.
cat >"$tmp/drive.lua" <<EOF
slurm = { SUCCESS = 0, ERROR = -1 }
dofile("$SRC/etc/cli_filter.lua")
local o = {}
for i = 1, #arg, 2 do o[arg[i]] = arg[i + 1] end
local rc = slurm_cli_pre_submit(o, 0)
print("rc=" .. rc .. " nodelist=" .. tostring(o.nodelist) .. " exclude=" .. tostring(o.exclude)
  .. (o.switches and " switches=" .. o.switches or ""))
EOF

# case: name, expected stdout, expected stderr (a regex, or "" for none), env..., --, options...
filter() {
  local name=$1 want_out=$2 want_err=$3; shift 3
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  rm -f "$tmp/args"
  env -i PATH="$PATH" SLURM_CONF="$tmp/etc/slurm.conf" TOPO_AWARE_TOOL="$tmp/topo-aware" \
    "${envs[@]}" "$LUA" "$tmp/drive.lua" "$@" >"$tmp/out" 2>"$tmp/err"
  local out err; out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
  if [ "$out" != "$want_out" ]; then
    echo "FAIL: $name: stdout '$out', expected '$want_out' (stderr: $err)"; fails=$((fails + 1)); return
  fi
  if [ -z "$want_err" ] && [ -n "$err" ]; then
    echo "FAIL: $name: stderr '$err', expected nothing"; fails=$((fails + 1)); return
  fi
  if [ -n "$want_err" ] && { [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! [[ $err =~ ^$want_err$ ]]; }; then
    echo "FAIL: $name: stderr '$err', expected one line matching '$want_err'"; fails=$((fails + 1)); return
  fi
  echo "PASS: $name"
}
args_are() {  # name, expected [a][b]... of the tool's arguments
  if [ "$(cat "$tmp/args" 2>/dev/null)" = "$2" ]; then echo "PASS: $1"; else
    echo "FAIL: $1: $(cat "$tmp/args" 2>/dev/null), expected $2"; fails=$((fails + 1)); fi
}
untouched='rc=0 nodelist=nil exclude=nil'
left='topo-aware: place: .*: left as asked'

filter "not asked: nothing runs" "$untouched" "" FAKE=pin -- type sbatch nodes 2
args_are "not asked: the tool never ran" ""
filter "TOPO_AWARE_PLACE=1: pinned" 'rc=0 nodelist=node[2,4] exclude=nil' "" \
  FAKE=pin TOPO_AWARE_PLACE=1 -- type sbatch nodes 2 partition gpu
args_are "TOPO_AWARE_PLACE=1: the tool's arguments, the plugin's configuration beside slurm.conf" \
  "[place][--config][$tmp/etc/topo-aware.toml][--from-slurm][-N][2][--of][sbatch][--partition][gpu]"
filter "a layout in TOPO_AWARE_PLACE, an exclude answer" 'rc=0 nodelist=nil exclude=node[1,3] switches=1' "" \
  FAKE=exclude "TOPO_AWARE_PLACE=tp=8,pp=2" -- type salloc nodes 4-4
args_are "the layout passed as --layout" \
  "[place][--config][$tmp/etc/topo-aware.toml][--from-slurm][-N][4][--of][sbatch][--layout][tp=8,pp=2]"
filter "--comment topo-aware:place=tp=8 among other words" 'rc=0 nodelist=node[2,4] exclude=nil' "" \
  FAKE=pin -- type sbatch nodes 2 comment "nightly topo-aware:place=tp=8 run"
args_are "the comment's layout passed" \
  "[place][--config][$tmp/etc/topo-aware.toml][--from-slurm][-N][2][--of][sbatch][--layout][tp=8]"
filter "--comment topo-aware:placement is not the tag" "$untouched" "" \
  FAKE=pin -- type sbatch nodes 2 comment "topo-aware:placement"
filter "TOPO_AWARE_PLACE=0 wins over the comment" "$untouched" "" \
  FAKE=pin TOPO_AWARE_PLACE=0 -- type sbatch nodes 2 comment "topo-aware:place"
filter "no -N: by --gpus" 'rc=0 nodelist=node[2,4] exclude=nil' "" \
  FAKE=pin TOPO_AWARE_PLACE=1 TOPO_AWARE_FABRIC=/f.toml -- type sbatch nodes 1-0 gpus 16
args_are "--gpus passed, TOPO_AWARE_FABRIC over the configuration's fabric" \
  "[place][--config][$tmp/etc/topo-aware.toml][--fabric][/f.toml][--from-slurm][--gpus][16][--of][sbatch]"
filter "a layout cannot run a command" 'rc=0 nodelist=node[2,4] exclude=nil' "" \
  FAKE=pin "TOPO_AWARE_PLACE=tp=2'; touch $tmp/pwned; '" -- type sbatch nodes 2
if [ -e "$tmp/pwned" ]; then echo "FAIL: the layout ran a command"; fails=$((fails + 1)); else echo "PASS: ... nothing ran"; fi
filter "srun inside an allocation: silent" "$untouched" "" \
  FAKE=pin TOPO_AWARE_PLACE=1 SLURM_JOB_ID=7 -- type srun nodes 2

# Fail-open: as asked, one line.
filter "the tool refuses" "$untouched" 'topo-aware: place: cannot place now: 3 hosts asked, 2 free: left as asked' \
  FAKE=refuse TOPO_AWARE_PLACE=1 -- type sbatch nodes 3
filter "the tool is slow" "$untouched" 'topo-aware: place: no answer within 5 s: left as asked' \
  FAKE=slow TOPO_AWARE_PLACE=1 -- type sbatch nodes 2
filter "no tool" "$untouched" "$left" TOPO_AWARE_PLACE=1 TOPO_AWARE_TOOL=/nonexistent/topo-aware \
  -- type sbatch nodes 2
filter "no configuration" "$untouched" \
  'topo-aware: place: no configuration \(cannot read /nonexistent/topo-aware.toml\): left as asked' \
  FAKE=pin TOPO_AWARE_PLACE=1 SLURM_CONF=/nonexistent/slurm.conf -- type sbatch nodes 2
filter "no configuration, TOPO_AWARE_FABRIC alone" 'rc=0 nodelist=node[2,4] exclude=nil' "" \
  FAKE=pin TOPO_AWARE_PLACE=1 SLURM_CONF=/nonexistent/slurm.conf TOPO_AWARE_FABRIC=/f.toml \
  -- type sbatch nodes 2
args_are "... passed as --fabric" "[place][--fabric][/f.toml][--from-slurm][-N][2][--of][sbatch]"
filter "a node range" "$untouched" 'topo-aware: place: a node range \(-N 2-4\): left as asked' \
  FAKE=pin TOPO_AWARE_PLACE=1 -- type sbatch nodes 2-4
filter "the job names its nodes" 'rc=0 nodelist=node1 exclude=nil' \
  'topo-aware: place: the job names its nodes \(--nodelist\): left as asked' \
  FAKE=pin TOPO_AWARE_PLACE=1 -- type sbatch nodes 2 nodelist node1
filter "several partitions" "$untouched" "$left" FAKE=pin TOPO_AWARE_PLACE=1 -- type sbatch nodes 2 partition a,b
filter "no count" "$untouched" \
  'topo-aware: place: neither -N COUNT nor --gpus COUNT: left as asked' \
  FAKE=pin TOPO_AWARE_PLACE=1 -- type sbatch nodes 1-0
filter "an answer that is not an sbatch option" "$untouched" "$left" \
  FAKE=none TOPO_AWARE_PLACE=1 -- type sbatch nodes 2
filter "an answer with an option the script does not set" "$untouched" \
  "topo-aware: place: unexpected answer '--nodelist=node1 --begin=now\\+1hour': left as asked" \
  FAKE=other TOPO_AWARE_PLACE=1 -- type sbatch nodes 2

[ "$fails" -eq 0 ] && echo "cli_filter.lua ($LUA): all passed" || echo "cli_filter.lua ($LUA): $fails failed"
[ "$fails" -eq 0 ]
