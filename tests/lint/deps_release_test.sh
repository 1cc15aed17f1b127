#!/usr/bin/env bash
# scripts/deps.sh picks each release's package names from /etc/os-release and refuses a release
# it does not know, naming the ones it supports (TOPOAWARE_OS_RELEASE stands in for the file).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
osr() {  # id codename pretty
  printf 'PRETTY_NAME="%s"\nID=%s\nVERSION_CODENAME=%s\n' "$3" "$1" "$2" >"$tmp/$2"
  echo "$tmp/$2"
}
list() { TOPOAWARE_OS_RELEASE=$1 "$src/scripts/deps.sh" --list "$2"; }

b=$(list "$(osr debian bookworm 'Debian GNU/Linux 12 (bookworm)')" test)
grep -qx clang-14 <<<"$b" && grep -qx libclang-rt-14-dev <<<"$b" || fail "bookworm: no clang-14"
t=$(list "$(osr debian trixie 'Debian GNU/Linux 13 (trixie)')" test)
grep -qx clang-19 <<<"$t" && grep -qx libclang-rt-19-dev <<<"$t" || fail "trixie: no clang-19"
grep -q -- '-14' <<<"$t" && fail "trixie: a Debian 12 name in its list"
f=$(list "$(osr debian forky 'Debian GNU/Linux forky/sid')" test)
grep -qx clang-21 <<<"$f" || fail "forky: no clang-21"
grep -qx hyperfine <<<"$f" && fail "forky has no hyperfine package, yet it is listed"
for r in "$b" "$t" "$f"; do
  for p in libslurm-dev slurmd python3-torch python3-mpi4py libscotch-dev; do
    grep -qx "$p" <<<"$r" || fail "$p missing from a release's test set"
  done
done
u=$(list "$(osr debian trixie x)" unit)
grep -qx slurmd <<<"$u" && fail "the unit set carries Slurm's daemons"
grep -qx libslurm-dev <<<"$u" || fail "the unit set lacks libslurm-dev (the plugin)"

# Unknown releases: refused with exit 1 and the supported list, before anything is installed.
for spec in "ubuntu noble Ubuntu 24.04 LTS" "debian bullseye Debian GNU/Linux 11 (bullseye)"; do
  read -r id code pretty <<<"$spec"
  if out=$(TOPOAWARE_OS_RELEASE=$(osr "$id" "$code" "$pretty") "$src/scripts/deps.sh" test 2>&1); then
    fail "$pretty accepted"
  fi
  grep -q "$pretty.*is not a release" <<<"$out" || fail "refusal does not name $pretty: $out"
  grep -q "supported: Debian 12 (bookworm), Debian 13 (trixie)" <<<"$out" ||
    fail "refusal does not name the supported releases: $out"
done
out=$(TOPOAWARE_OS_RELEASE=$tmp/none "$src/scripts/deps.sh" build 2>&1) && fail "no os-release accepted"
grep -q "cannot read $tmp/none" <<<"$out" || fail "missing os-release not named: $out"
echo "deps release table: 15 checks passed"
