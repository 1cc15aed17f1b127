#!/usr/bin/env bash
# Fails unless the plugin's defined dynamic symbols are only SPANK's: slurm_spank_*, plugin_*
# and spank_plugin_version (nm -D --defined-only). Usage: check_exports.sh PLUGIN.so
set -euo pipefail
so=${1:?usage: check_exports.sh PLUGIN.so}
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
# Undefined symbols of our own (C++, or the C facade's ta_*) would make dlopen fail in srun and slurmd (a missing definition
# in a static library links fine into a shared object); Slurm's C API is the only thing the host
# process may provide.
own=$(nm -D --undefined-only "$so" | awk '{print $NF}' | grep -E '^(_ZN9topoaware|ta_)' || true)
if [ -n "$own" ]; then
  echo "topo-aware: $so leaves its own symbols undefined:" >&2
  echo "$own" >&2
  exit 1
fi
echo "$so exports only: $(tr '\n' ' ' <<<"$syms")"
