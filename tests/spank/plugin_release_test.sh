#!/usr/bin/env bash
# Slurm's own plugin loader against the plugin's builds: this host's real srun (no daemons: a
# minimal slurm.conf and plugstack.conf of the test's own, srun --help) loads the build for its
# release and shows --topo-aware, refuses a bad SPEC with the plugin's message before asking for
# an allocation, refuses each other release's build with its own message
# (plugin_load_from_file: "Incompatible Slurm plugin ... version (...)") and fails when the line
# says `required`, and with `optional` runs on without the option. What docs/install.md quotes.
# With TOPOAWARE_CLI (the topo-aware binary), `doctor --spank` says the same of each build
# against the real Slurm here: 0 for its own, 3 for the others.
# Usage: plugin_release_test.sh PLUGIN.so [OTHER_RELEASE_PLUGIN.so...]; skipped (77) without srun.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
own=${1:?usage: plugin_release_test.sh PLUGIN.so [OTHER.so...]}
shift
command -v srun >/dev/null || { echo "no srun on PATH"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/slurm.conf" <<CONF
ClusterName=topoawarerelease
SlurmctldHost=localhost
PlugStackConfig=$tmp/plugstack.conf
NodeName=n1 CPUs=1 State=UNKNOWN
PartitionName=p Nodes=n1 Default=YES
CONF
installed=$(SLURM_CONF=$tmp/slurm.conf srun -V 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' |
  head -1 || true)
help() {  # mode plugin -> srun --help output in $tmp/out, its status in $tmp/rc
  echo "$1 $2" >"$tmp/plugstack.conf"
  set +e
  SLURM_CONF=$tmp/slurm.conf timeout 20 srun --help >"$tmp/out" 2>&1
  echo $? >"$tmp/rc"
  set -e
}
help required "$own"
[ "$(cat "$tmp/rc")" = 0 ] || fail "srun ${installed:-?} did not load its own build $own: $(cat "$tmp/out")"
grep -q -- '--topo-aware' "$tmp/out" || fail "srun --help shows no --topo-aware with $own loaded"
echo "srun ${installed:-?} loads $own: --topo-aware in its --help"
# A bad SPEC: srun stops before it asks for an allocation, with the plugin's own message.
set +e
SLURM_CONF=$tmp/slurm.conf timeout 20 srun --topo-aware=tp=banana true >"$tmp/bad" 2>&1
bad_rc=$?
set -e
[ "$bad_rc" -ne 0 ] || fail "srun ran with --topo-aware=tp=banana"
grep -q 'topo-aware: invalid --topo-aware=tp=banana: .*tp=banana is not a size' "$tmp/bad" ||
  fail "srun's refusal of --topo-aware=tp=banana is not the plugin's message: $(cat "$tmp/bad")"
if grep -q 'Unable to contact slurm controller' "$tmp/bad"; then
  fail "srun asked for an allocation before refusing the SPEC: $(cat "$tmp/bad")"
fi
echo "  refuses --topo-aware=tp=banana: $(grep -m1 'invalid --topo-aware' "$tmp/bad")"
doctor() {  # plugin expected-status
  [ -n "${TOPOAWARE_CLI:-}" ] || return 0
  local rc=0
  SLURM_CONF=$tmp/slurm.conf "$TOPOAWARE_CLI" doctor --spank "$1" >"$tmp/doctor" 2>&1 || rc=$?
  [ "$rc" = "$2" ] || fail "doctor --spank $1 exited $rc, not $2: $(cat "$tmp/doctor")"
  echo "  doctor --spank: $(grep verdict "$tmp/doctor" | cut -c1-110)"
}
doctor "$own" 0
for other in "$@"; do
  rel=$(basename "$(dirname "$other")")
  if [ -n "$installed" ] && [ "${installed%.*}" = "$rel" ]; then
    # The matrix's build for the release installed here (24.11 on Debian 13): built from another
    # copy of the same headers, so srun must load it as its own.
    help required "$other"
    [ "$(cat "$tmp/rc")" = 0 ] && grep -q -- '--topo-aware' "$tmp/out" ||
      fail "srun $installed did not load the matrix's $rel build $other: $(cat "$tmp/out")"
    echo "srun $installed loads the matrix's $rel build too (its own release)"
    doctor "$other" 0
    continue
  fi
  help required "$other"
  [ "$(cat "$tmp/rc")" != 0 ] || fail "srun ${installed:-?} ran with the $rel build required"
  grep -qF "Incompatible Slurm plugin $other version ($rel." "$tmp/out" ||
    fail "srun's refusal of the $rel build is not Slurm's message: $(cat "$tmp/out")"
  echo "srun ${installed:-?} refuses the $rel build (required): $(grep -m1 Incompatible "$tmp/out")"
  help optional "$other"
  [ "$(cat "$tmp/rc")" = 0 ] || fail "srun failed with the $rel build optional: $(cat "$tmp/out")"
  if grep -q -- '--topo-aware' "$tmp/out"; then fail "--topo-aware shown from the $rel build"; fi
  echo "  optional: srun runs on, without --topo-aware"
  doctor "$other" 3
done
