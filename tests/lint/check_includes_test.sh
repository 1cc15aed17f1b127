#!/usr/bin/env bash
# scripts/check-includes.py finds a standard name used without its header, names file, line and
# header, ignores comments and strings, and --fix adds exactly the missing include into the
# file's block of standard headers; the fixed file then passes.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
check=$src/scripts/check-includes.py
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$src/tests/lint/fixtures/leans_on_neighbour.cc.in" "$tmp/leans_on_neighbour.cc"

if out=$(python3 "$check" "$tmp/leans_on_neighbour.cc" 2>&1); then
  fail "a file using std::find and std::set_union without <algorithm> passed"
fi
echo "$out"
grep -qx "$tmp/leans_on_neighbour.cc:9: std::set_union without <algorithm>" <<<"$out" ||
  fail "expected the first <algorithm> name, at line 9"
grep -q "without <iterator>" <<<"$out" || fail "std::back_inserter without <iterator> not found"
[ "$(grep -c ' without <' <<<"$out")" -eq 2 ] ||
  fail "expected exactly <algorithm> and <iterator> (comments, strings, set_union are not <set>)"

python3 "$check" --fix "$tmp/leans_on_neighbour.cc" >/dev/null 2>&1
diff <(sed -n 4,6p "$tmp/leans_on_neighbour.cc") <(printf '#include <algorithm>\n#include <iterator>\n#include <vector>\n') ||
  fail "--fix did not put <algorithm> and <iterator> in order into the block"
python3 "$check" "$tmp/leans_on_neighbour.cc" || fail "the fixed file still fails"
echo "check-includes: 4 checks passed"
