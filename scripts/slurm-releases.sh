#!/usr/bin/env bash
# Other Slurm releases' headers and libslurmfull.so, for building and checking the SPANK plugin
# against each (issue 35's version matrix; ctest's spank_release_* tests, docs/install.md).
#
# Usage: scripts/slurm-releases.sh DIR [SUITE...]
#   For each Debian SUITE (default: trixie forky, Slurm 24.11 and 26.05 today), downloads that
#   suite's libslurm-dev and slurm-wlm-basic-plugins with a private apt configuration under
#   DIR/apt (the host's apt sources, lists and cache are never touched) and unpacks them with
#   dpkg-deb -x into DIR/SUITE. Prints one line per suite: "SUITE RELEASE DIR/SUITE". Idempotent:
#   a suite already unpacked is reused (remove DIR to fetch again).
# The suites' binaries need a newer glibc than Debian 12's: nothing from them runs here; the
# plugin is only compiled against their headers and its symbols checked against their library.
# Needs apt-get and dpkg-deb (any Debian); no root: the download runs unsandboxed as the caller.
set -euo pipefail
me="topo-aware: slurm-releases.sh"
die() { echo "$me: $*" >&2; exit 1; }
[ $# -ge 1 ] || { sed -n '/^# Usage:/,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
dir=$1
shift
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(trixie forky)
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || die "needs apt-get and dpkg-deb"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# The archive the host's apt reads (as scripts/debroot.sh finds it), else Debian's own.
mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
           2>/dev/null | grep -oE '(https?)://[^ ]+/debian/?( |$)' | grep -v security | head -1 |
           tr -d ' ' || true)
mirror=${SLURM_RELEASES_MIRROR:-${mirror:-http://deb.debian.org/debian}}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

# shellcheck source=scripts/debian-release.sh
. "$(dirname "$0")/debian-release.sh"

apt_ready=0
apt_opts=()
prepare_apt() {
  [ $apt_ready = 1 ] && return 0
  local a=$dir/apt s
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/dl"
  : >"$a/status"
  : >"$a/sources.list"
  # A testing suite's Release file carries a Valid-Until a week or so ahead, and this machine's
  # clock can be past that of the archive it reaches: apt 3.0 (Debian 13) then refuses forky
  # ("Release file ... is expired"), apt 2.6 (Debian 12) did not. Signatures are still checked;
  # only that date is not, for forky alone (as scripts/debroot.sh does for a forky root).
  for s in "${suites[@]}"; do
    local opts="signed-by=$keyring"
    [ "$s" = forky ] && opts+=" check-valid-until=no"
    echo "deb [$opts] $mirror $s main" >>"$a/sources.list"
  done
  apt_opts=(-q -o "Dir::Etc::SourceList=$a/sources.list" -o Dir::Etc::SourceParts=/nonexistent
            -o "Dir::State=$a" -o "Dir::State::Lists=$a/lists" -o "Dir::State::status=$a/status"
            -o "Dir::Cache=$a/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root
            -o APT::Get::AllowUnauthenticated=false)
  apt-get "${apt_opts[@]}" update >"$a/update.log" 2>&1 ||
    die "apt-get update from $mirror failed ($a/update.log): $(tail -1 "$a/update.log")"
  apt_ready=1
}

for s in "${suites[@]}"; do
  root=$dir/$s
  if [ ! -f "$root/.done" ]; then
    prepare_apt
    rm -rf "$root" "$dir/apt/dl/$s"
    mkdir -p "$dir/apt/dl/$s" "$root"
    (cd "$dir/apt/dl/$s" &&
       apt-get "${apt_opts[@]}" download "libslurm-dev/$s" "slurm-wlm-basic-plugins/$s") \
      >"$dir/apt/dl/$s.log" 2>&1 ||
      die "cannot download $s's libslurm-dev ($dir/apt/dl/$s.log): $(tail -1 "$dir/apt/dl/$s.log")"
    for deb in "$dir/apt/dl/$s"/*.deb; do dpkg-deb -x "$deb" "$root"; done
    [ -f "$root/usr/include/slurm/spank.h" ] || die "$s: no slurm/spank.h in its libslurm-dev"
    ls "$root"/usr/lib/*/slurm-wlm/libslurmfull.so >/dev/null 2>&1 ||
      die "$s: no libslurmfull.so in its slurm-wlm-basic-plugins"
    touch "$root/.done"
  fi
  rel=$(topoaware_slurm_release "$root/usr/include/slurm/slurm_version.h") ||
    die "$s: no SLURM_VERSION_NUMBER in $root"
  echo "$s $rel $root"
done
