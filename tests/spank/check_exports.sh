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
echo "$so exports only: $(tr '\n' ' ' <<<"$syms")"
