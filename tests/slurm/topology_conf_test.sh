#!/usr/bin/env bash
# A topology.conf written by `topo-aware fabric --of slurm-tree` is loaded by a real slurmctld
# (Debian's Slurm) and `scontrol show topology` must report exactly the switches, children,
# nodes and link speeds of the file, for several real and described fabrics.
#
# topology/block: Debian 12 ships Slurm 22.05, whose slurmctld has no topology/block plugin
# (it came in 23.11). When the installed slurmctld cannot load it, the block file is checked
# against the rules slurmctld 23.11+ applies (base block size first, every size base * 2^k,
# no block smaller than the base) and re-imported; when it can, it is loaded for real too.
#
# Usage: topology_conf_test.sh BUILD_DIR   (ctest passes it). Exit 77 = skipped (not root, Slurm
# or munge missing). Uses its own munged socket/key, port 7817/7818 (TOPOCONF_TEST_PORT), and a
# temp directory, so it can run beside the e2e lab (6817/6818).
set -euo pipefail

BUILD=${1:?usage: topology_conf_test.sh BUILD_DIR}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TA="$BUILD/tools/topo-aware"
PORT=${TOPOCONF_TEST_PORT:-7817}
SHARED=${TOPOAWARE_SHARED_DIR:-$SRC/../shared}

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root (slurmctld runs as SlurmUser=root here)"
for b in munged slurmctld scontrol python3; do
  command -v "$b" >/dev/null || skip "$b not installed"
done
[ -x "$TA" ] || fail "$TA not built"

WORK=$(mktemp -d /tmp/topoaware-topoconf.XXXXXX)
chmod 0755 "$WORK"
mkdir -p "$WORK"/{munge,state,run,log,etc}
CTLD_PID=""
cleanup() {
  if [ -n "$CTLD_PID" ] && kill -0 "$CTLD_PID" 2>/dev/null; then
    kill "$CTLD_PID"; wait "$CTLD_PID" 2>/dev/null || true
  fi
  if [ -s "$WORK/run/munged.pid" ]; then
    kill "$(cat "$WORK/run/munged.pid")" 2>/dev/null || true
  fi
  [ -n "${KEEP_WORK:-}" ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$WORK/munge/munge.key"
munged -f --socket="$WORK/munge/munge.socket.2" --key-file="$WORK/munge/munge.key" \
  --pid-file="$WORK/run/munged.pid" --log-file="$WORK/log/munged.log" \
  --seed-file="$WORK/munge/munged.seed" || fail "munged did not start"

HOST=$(hostname -s)
export SLURM_CONF="$WORK/etc/slurm.conf"

# slurm.conf for a topology file: one NodeName line per Nodes= list of the file.
write_slurm_conf() {  # $1 = topology plugin, $2 = topology.conf
  {
    cat <<EOF
ClusterName=topoconf
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$WORK/munge/munge.socket.2
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
StateSaveLocation=$WORK/state
SlurmctldPidFile=$WORK/run/slurmctld.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmctldDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
TopologyPlugin=$1
EOF
    grep -o 'Nodes=[^ ]*' "$2" | sed 's/^Nodes=/NodeName=/; s/$/ NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN/'
    echo "PartitionName=all Nodes=ALL Default=YES State=UP"
  } >"$SLURM_CONF"
  cp "$2" "$WORK/etc/topology.conf"
}

start_ctld() {
  rm -rf "$WORK/state"/* "$WORK/log/slurmctld.log"
  slurmctld -D -c -f "$SLURM_CONF" >"$WORK/log/slurmctld.out" 2>&1 &
  CTLD_PID=$!
  for _ in $(seq 1 300); do
    if scontrol ping >/dev/null 2>&1; then return 0; fi
    kill -0 "$CTLD_PID" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}

stop_ctld() {
  kill "$CTLD_PID" 2>/dev/null || true
  wait "$CTLD_PID" 2>/dev/null || true
  CTLD_PID=""
}

# Compares a topology.conf with `scontrol show topology`: same switches, same children, same
# nodes on leaves, upper switches holding exactly the union of the nodes below, same LinkSpeed.
compare() {  # $1 = topology.conf, $2 = scontrol output
  python3 - "$1" "$2" <<'PY'
import re, sys

def expand(hl):
    out = []
    for item in re.findall(r'[^,\[]*(?:\[[^\]]*\][^,\[]*)*', hl):
        if not item:
            continue
        parts = re.split(r'(\[[^\]]*\])', item)
        names = ['']
        for p in parts:
            if p.startswith('['):
                vals = []
                for r in p[1:-1].split(','):
                    lo, _, hi = r.partition('-')
                    hi = hi or lo
                    w = len(lo) if lo.startswith('0') and len(lo) > 1 else 0
                    vals += [str(v).zfill(w) for v in range(int(lo), int(hi) + 1)]
                names = [n + v for n in names for v in vals]
            else:
                names = [n + p for n in names]
        out += names
    return out

def parse(path):
    sw = {}
    for line in open(path):
        line = line.split('#')[0].strip()
        if not line.startswith('SwitchName='):
            continue
        kv = dict(t.split('=', 1) for t in line.split())
        sw[kv['SwitchName']] = {
            'switches': set(expand(kv.get('Switches', ''))),
            'nodes': set(expand(kv.get('Nodes', ''))),
            'speed': kv.get('LinkSpeed'),
            'level': kv.get('Level'),
        }
    return sw

want, got = parse(sys.argv[1]), parse(sys.argv[2])
errors = []
if set(want) != set(got):
    errors.append('switches differ: only in file %s, only in slurmctld %s'
                  % (sorted(set(want) - set(got))[:5], sorted(set(got) - set(want))[:5]))
def below(name, seen=()):
    s = want[name]
    nodes = set(s['nodes'])
    for c in s['switches']:
        if c not in seen:
            nodes |= below(c, seen + (name,))
    return nodes
for name in sorted(set(want) & set(got)):
    w, g = want[name], got[name]
    if w['switches'] != g['switches']:
        errors.append('%s: Switches %s vs %s' % (name, sorted(w['switches'])[:5], sorted(g['switches'])[:5]))
    if w['switches']:
        if g['nodes'] != below(name):
            errors.append('%s: slurmctld puts %d nodes below it, the file %d'
                          % (name, len(g['nodes']), len(below(name))))
    elif w['nodes'] != g['nodes']:
        errors.append('%s: Nodes differ (%d vs %d)' % (name, len(w['nodes']), len(g['nodes'])))
    if w['speed'] and w['speed'] != g['speed']:
        errors.append('%s: LinkSpeed %s vs %s' % (name, w['speed'], g['speed']))
    if not w['switches'] and g['level'] != '0':
        errors.append('%s: a leaf at Level=%s' % (name, g['level']))
for e in errors[:20]:
    print('  mismatch:', e)
print('  %d switches, %d leaves compared: %s' % (len(want), sum(1 for s in want.values() if not s['switches']),
      'ok' if not errors else '%d mismatches' % len(errors)))
sys.exit(1 if errors else 0)
PY
}

check_tree() {  # $1 = label, rest = topo-aware fabric arguments
  local label=$1; shift
  local conf="$WORK/$label.conf"
  "$TA" fabric "$@" --of slurm-tree -o "$conf" || fail "$label: topo-aware fabric failed"
  write_slurm_conf topology/tree "$conf"
  start_ctld || { tail -n 20 "$WORK/log/slurmctld.log" "$WORK/log/slurmctld.out" >&2; fail "$label: slurmctld did not start"; }
  scontrol show topology >"$WORK/$label.scontrol" || fail "$label: scontrol show topology failed"
  stop_ctld
  if grep -iE 'error:.*(topolog|switch)|fatal' "$WORK/log/slurmctld.log" >&2; then
    fail "$label: slurmctld complained about the topology"
  fi
  echo "$label: slurmctld loaded $(grep -c '^SwitchName=' "$conf") switches"
  compare "$conf" "$WORK/$label.scontrol" || { head -5 "$WORK/$label.scontrol" >&2; fail "$label: scontrol show topology differs"; }
}

FX="$SRC/tests/fixtures"
check_tree psmn-x5-ibnetdiscover -i "$FX/ibnetdiscover/psmn-x5-qdr-voltaire-mellanox-100nodes.ibnetdiscover.txt" \
  --map "$FX/ibnetdiscover/psmn-x5-guid-to-hostname.map"
check_tree dgx-h100-rails -i "$SRC/etc/cluster-dgx-h100.toml"
check_tree lab -i "$SRC/etc/lab-cluster.toml"
check_tree unbalanced-4level -i "$FX/slurm-topology/slurm-testsuite-4level-tree-unbalanced.topology.conf"
check_tree disconnected -i "$FX/slurm-topology/slurm-testsuite-disconnected-trunks.topology.conf"
if [ -f "$SHARED/fixtures/ibnetdiscover/hk-hdr-cs8500-192sw-1182ca-ibdiagnet-generated.ibnetdiscover.txt" ]; then
  check_tree hdr-cs8500 -i "$SHARED/fixtures/ibnetdiscover/hk-hdr-cs8500-192sw-1182ca-ibdiagnet-generated.ibnetdiscover.txt"
fi

# topology/block.
# Written for the installed Slurm (scontrol, slurmd or slurmctld -V) by default: before 23.11, which has no
# topology/block, a refusal naming that release; the file is then written for 24.05 to be held
# against slurmctld's rules below.
BLOCK="$WORK/dgx-block.conf"
installed=$(slurmctld -V | awk '{print $2}')
if "$TA" fabric -i "$SRC/etc/cluster-dgx-h100.toml" --of slurm-block -o "$BLOCK" 2>"$WORK/block.err"; then
  grep -q "for Slurm ${installed%.*} (" "$BLOCK" ||
    fail "the block file does not say it is for the installed Slurm $installed"
else
  grep -q "Slurm ${installed%.*} (.*no topology/block" "$WORK/block.err" ||
    fail "slurm-block for Slurm $installed: $(cat "$WORK/block.err")"
  echo "block: refused for the installed Slurm $installed: $(cat "$WORK/block.err")"
  "$TA" fabric -i "$SRC/etc/cluster-dgx-h100.toml" --of slurm-block --slurm-version 24.05 -o "$BLOCK"
fi
write_slurm_conf topology/block "$BLOCK"
if start_ctld; then
  scontrol show topology >"$WORK/block.scontrol"
  stop_ctld
  for b in $(grep -o '^BlockName=[^ ]*' "$BLOCK" | cut -d= -f2); do
    grep -q "BlockName=$b " "$WORK/block.scontrol" || fail "block $b not in scontrol show topology"
  done
  echo "block: slurmctld loaded $(grep -c '^BlockName=' "$BLOCK") blocks"
else
  stop_ctld
  grep -qiE 'topology/block|plugin' "$WORK/log/slurmctld.log" "$WORK/log/slurmctld.out" ||
    fail "slurmctld refused topology/block for an unexpected reason"
  echo "block: slurmctld $(slurmctld -V | awk '{print $2}') has no topology/block plugin (Slurm 23.11+);" \
       "checking the file against slurmctld's block rules instead"
  python3 - "$BLOCK" <<'PY' || fail "block file breaks slurmctld's rules"
import sys
blocks, sizes = [], None
for line in open(sys.argv[1]):
    line = line.split('#')[0].strip()
    if line.startswith('BlockName='):
        kv = dict(t.split('=', 1) for t in line.split())
        blocks.append(kv)
    elif line.startswith('BlockSizes='):
        sizes = [int(x) for x in line.split('=', 1)[1].split(',')]
assert blocks and sizes, 'no blocks or no BlockSizes'
base = sizes[0]
for s in sizes:
    r = s // base
    assert s % base == 0 and r & (r - 1) == 0 and r <= 1 << 15, 'BlockSizes %s' % s
print('  %d blocks, BlockSizes=%s: ok' % (len(blocks), ','.join(map(str, sizes))))
PY
  "$TA" fabric -i "$BLOCK" --of json >/dev/null || fail "the block file does not re-import"
fi
echo "PASS"
