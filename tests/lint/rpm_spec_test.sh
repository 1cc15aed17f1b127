#!/usr/bin/env bash
# packaging/rpm/topo-aware.spec parses (rpmspec, Debian's rpm package) and pins the plugin
# package to the Slurm release it is built for, named in its release tag: for 22.05, 24.11 and
# 26.05, "slurm >= X.Y", "slurm < X.(Y+1)" and release "1.slXY", at the project's version (the
# one argument, from CMake's PROJECT_VERSION). Skipped (77) without rpmspec.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
version=${1:?usage: rpm_spec_test.sh PROJECT_VERSION}
command -v rpmspec >/dev/null || { echo "no rpmspec (Debian package rpm)"; exit 77; }
spec=$src/packaging/rpm/topo-aware.spec
for v in 22.05.8:22.05:22.06:2205 24.11.5:24.11:24.12:2411 26.05.5:26.05:26.06:2605; do
  IFS=: read -r full rel next tag <<<"$v"
  req=$(rpmspec -q --requires "$spec" --define "slurm_version $full" 2>&1)
  grep -qx "slurm >= $rel" <<<"$req" && grep -qx "slurm < $next" <<<"$req" ||
    fail "Slurm $full: the plugin package requires: $req"
  prov=$(rpmspec -q --provides "$spec" --define "slurm_version $full" 2>&1)
  grep -qx "topo-aware-spank-slurm$tag = $version-1.sl$tag" <<<"$prov" ||
    fail "Slurm $full: no topo-aware-spank-slurm$tag $version of release 1.sl$tag: $prov"
  echo "Slurm $full: topo-aware-spank-slurm$tag requires slurm >= $rel, < $next"
done
