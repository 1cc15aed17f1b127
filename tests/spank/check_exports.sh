#!/usr/bin/env bash
# Fails unless the plugin's defined dynamic symbols are only SPANK's: slurm_spank_*, plugin_*
# and spank_plugin_version (nm -D --defined-only). With the release it was built for
# (SLURM_VERSION_NUMBER, 0xMMmmuu) and that release's libslurmfull.so, also unless its
# plugin_version has that major.minor (what Slurm's plugin loader compares, masking 0xffff00) and
# every slurm_*/spank_* symbol it leaves undefined is defined in that library.
# Usage: check_exports.sh PLUGIN.so [VERSION_HEX LIBSLURMFULL.so [INCLUDE_DIR]]
set -euo pipefail
so=${1:?usage: check_exports.sh PLUGIN.so [VERSION_HEX LIBSLURMFULL.so [INCLUDE_DIR]]}
want_hex=${2:-}
full=${3:-}
syms=$(nm -D --defined-only "$so" | awk '{print $NF}' | sort -u)
[ -n "$syms" ] || { echo "topo-aware: $so exports nothing" >&2; exit 1; }
bad=$(grep -Ev '^(slurm_spank_[a-z_]+|plugin_(name|type|version)|spank_plugin_version)$' <<<"$syms" || true)
if [ -n "$bad" ]; then
  echo "topo-aware: $so exports symbols beyond SPANK's:" >&2
  echo "$bad" >&2
  exit 1
fi
for need in plugin_name plugin_type plugin_version slurm_spank_init slurm_spank_task_init; do
  grep -qx "$need" <<<"$syms" || { echo "topo-aware: $so does not export $need" >&2; exit 1; }
done
# Undefined symbols of our own (C++: any mangled name in namespace topoaware, members, vtables,
# typeinfo and local statics alike; or the C facade's ta_*) would make dlopen fail in srun and
# slurmd (a missing definition in a static library links fine into a shared object); Slurm's C
# API is the only thing the host process may provide.
undefined=$(nm -D --undefined-only "$so" | awk '{print $NF}')
own=$(grep -E '^_Z.*9topoaware|^ta_' <<<"$undefined" || true)
if [ -n "$own" ]; then
  echo "topo-aware: $so leaves its own symbols undefined:" >&2
  echo "$own" >&2
  exit 1
fi
echo "$so exports only: $(tr '\n' ' ' <<<"$syms")"
[ -n "$want_hex" ] || exit 0

# A 4-byte object's value: its address to a file offset through the section holding it.
u32_of() {  # symbol -> value on stdout; status 1 when the plugin has no such object
  local addr sym sec_addr='' sec_off='' name type sa so_ sz rest
  addr=$(readelf -sW "$so" | awk -v n="$1" '$NF == n && $4 == "OBJECT" {print $2; exit}')
  [ -n "$addr" ] || return 1
  sym=$((16#$addr))
  while read -r name type sa so_ sz rest; do
    [ "$name" != NULL ] && [ -n "${sz:-}" ] || continue
    if (( sym >= 16#$sa && sym < 16#$sa + 16#$sz )); then
      sec_addr=$((16#$sa)) sec_off=$((16#$so_))
      break
    fi
  done < <(readelf -SW "$so" | sed -n 's/^ *\[ *[0-9]*\] //p')
  [ -n "$sec_addr" ] || return 1
  od -An -tu4 -j $((sym - sec_addr + sec_off)) -N4 "$so" | tr -d ' '
}
got=$(u32_of plugin_version) || { echo "topo-aware: $so has no plugin_version object" >&2; exit 1; }
want=$((want_hex))
if [ $((got & 0xffff00)) -ne $((want & 0xffff00)) ]; then
  printf 'topo-aware: %s: plugin_version 0x%06x, not Slurm 0x%06x'"'"'s major.minor\n' "$so" "$got" "$want" >&2
  exit 1
fi
# From 25.05 an init failure fails the job, not the node (topo_aware_spank.c): the plugin sets
# slurm_spank_init_failure_mode to ESPANK_JOB_FAILURE, whose value is read from its headers.
if [ $((want)) -ge $((0x190500)) ]; then
  inc=${4:?check_exports.sh: the headers folder is needed from Slurm 25.05}
  mode=$(u32_of slurm_spank_init_failure_mode) ||
    { echo "topo-aware: $so (Slurm 25.05+) does not set slurm_spank_init_failure_mode" >&2; exit 1; }
  job_failure=$(printf '#include <stdio.h>\n#include <slurm/spank.h>\nint main(void) { printf("%%d", ESPANK_JOB_FAILURE); return 0; }\n' |
    { gcc -x c -I"$inc" -o "${TMPDIR:-/tmp}/espank.$$" - && "${TMPDIR:-/tmp}/espank.$$"; })
  rm -f "${TMPDIR:-/tmp}/espank.$$"
  [ "$mode" = "$job_failure" ] ||
    { echo "topo-aware: $so: slurm_spank_init_failure_mode $mode, not ESPANK_JOB_FAILURE ($job_failure)" >&2; exit 1; }
  echo "$so: an init failure fails the job (slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE = $mode)"
fi
# Slurm's symbols the plugin needs, each defined in that release's library.
defined=$(nm -D --defined-only "$full" | awk '{print $NF}' | LC_ALL=C sort -u)
missing=$(grep -E '^(slurm|spank)_' <<<"$undefined" | LC_ALL=C sort -u |
  LC_ALL=C comm -23 - <(echo "$defined") || true)
if [ -n "$missing" ]; then
  echo "topo-aware: $so needs symbols $full does not define:" >&2
  echo "$missing" >&2
  exit 1
fi
printf '%s: plugin_version 0x%06x (Slurm %d.%02d), its %d Slurm symbols all in %s\n' "$so" "$got" \
  $((got >> 16)) $(((got >> 8) & 0xff)) \
  "$(grep -cE '^(slurm|spank)_' <<<"$undefined")" "$full"
