#!/usr/bin/env bash
# Debian roots for building and testing on another Debian release than the host's: one helper for
# every stage that needs one (scripts/test.sh's Debian 13 build, scripts/release-check.sh, the
# Slurm-releases lab). A root is made once with `debootstrap --variant=minbase` from Debian's own
# archive (the mirror the host's apt uses) and cached; packages go in with plain apt inside the
# root, so the host's apt state is never touched. Commands run in a private mount namespace:
# /proc, /sys, /dev and the source tree are mounted for that command only and vanish with it,
# whatever way it ends.
#
# Usage:
#   scripts/debroot.sh create SUITE DIR [PACKAGE...]  make DIR (if not there yet) as a SUITE root
#                                                     and install the packages it lacks
#   scripts/debroot.sh run DIR [-b PATH]... -- CMD... run CMD as root inside DIR, in this source
#                                                     tree (mounted at the same path, ../shared
#                                                     beside it), each PATH given bound too
# Inside a root, the tree's build/ is the root's own (DIR/var/cache/topo-aware/build, kept between
# runs): build/release there is never the host's build/release, and the roots stay out of sight.
# /tmp is a fresh tmpfs each run: no later run sees what a command left there. Daemons a command
# leaves running (a lab that quickstart.sh leaves up) keep running, and keep that /tmp, after
# the run, where no later run can reach them to take them down: take the lab down in the same
# command (`tests/lab/lab.sh down`), or its slurmctld holds the lab's port against the next lab.
# SUITE: bookworm (12), trixie (13), forky (14). DEBROOT_MIRROR overrides the mirror.
# Needs root and debootstrap (scripts/deps.sh test installs it).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
me="topo-aware: debroot.sh"
die() { echo "$me: $*" >&2; exit 1; }
usage() { sed -n '/^# Usage:/,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts)"

# The archive the host's apt reads, so roots come from the same place (first Debian URI that is
# not the security archive, in one-line or deb822 sources).
mirror() {
  [ -n "${DEBROOT_MIRROR:-}" ] && { echo "$DEBROOT_MIRROR"; return; }
  local m
  m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
        2>/dev/null | grep -oE '(https?)://[^ ]+/debian/?( |$)' | grep -v security | head -1 |
        tr -d ' ' || true)
  echo "${m:-http://deb.debian.org/debian}"
}

# debootstrap 1.0.128 (Debian 12) has no script named forky yet; testing bootstraps like sid.
script_for() {
  case "$1" in
    bookworm|trixie) echo "" ;;
    forky) echo /usr/share/debootstrap/scripts/sid ;;
    *) die "unknown suite '$1': supported are bookworm (Debian 12), trixie (Debian 13), forky (Debian 14)" ;;
  esac
}

# Runs CMD in DIR with the mounts it needs, in a mount namespace of its own (nothing leaks to the
# host, nothing to unmount by hand). Binds: lines "SOURCE<tab>TARGET", TARGET inside the root,
# in order (a later one may cover part of an earlier one).
in_root() {  # dir, binds, working directory inside, cmd...
  local dir=$1 binds=$2 cwd=$3; shift 3
  unshare --mount --propagation private -- bash -s "$dir" "$binds" "$cwd" "$@" <<'EOF'
set -euo pipefail
dir=$1 binds=$2 cwd=$3; shift 3
# The root its own mount point: inside, `unshare --mount` (the lab gives each slurmd its own
# mount namespace) changes the propagation of /, which fails with EINVAL where / is a plain
# directory of the host's filesystem.
mount --bind "$dir" "$dir"
mount -t proc proc "$dir/proc"
mount --rbind /sys "$dir/sys"
mount --rbind /dev "$dir/dev"
mount -t tmpfs tmpfs "$dir/tmp"
mkdir -p "$dir/run/netns"
while IFS=$'\t' read -r src dst; do
  [ -n "$src" ] || continue
  mkdir -p "$src" "$dir$dst"
  mount --bind "$src" "$dir$dst"
done <<< "$binds"
# This machine's name resolution, as a real install of it would have (munged looks its
# hostname up).
cp -fL /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
cp -fL /etc/hosts "$dir/etc/hosts" 2>/dev/null || true
exec chroot "$dir" /usr/bin/env -i -C "$cwd" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" CI="${CI:-}" JOBS="${JOBS:-}" "$@" </dev/null
EOF
}

create() {  # suite, dir, packages...
  local suite=$1 dir=$2; shift 2
  local script m
  script=$(script_for "$suite")
  command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
  mkdir -p "$(dirname "$dir")"
  dir=$(cd "$(dirname "$dir")" && pwd)/$(basename "$dir")
  exec 9>"$dir.lock"
  flock 9
  if [ -f "$dir/.debroot" ] && [ "$(cat "$dir/.debroot")" != "$suite" ]; then
    die "$dir is a $(cat "$dir/.debroot") root, not $suite (remove it to make another)"
  fi
  if [ ! -f "$dir/.debroot" ]; then
    m=$(mirror)
    echo "$me: debootstrap --variant=minbase $suite $dir ($m)" >&2
    # Made beside and moved into place, so an interrupted run never leaves a root that looks made.
    rm -rf "$dir.partial"
    local t0=$SECONDS
    debootstrap --variant=minbase --components=main "$suite" "$dir.partial" "$m" $script \
      >"$dir.debootstrap.log" 2>&1 ||
      die "debootstrap $suite failed; the last lines of $dir.debootstrap.log:
$(tail -5 "$dir.debootstrap.log")"
    # No daemon a package installs may start inside the root (the lab starts its own), and no
    # recommends: what a stage needs, it names.
    printf '#!/bin/sh\nexit 101\n' >"$dir.partial/usr/sbin/policy-rc.d"
    chmod 755 "$dir.partial/usr/sbin/policy-rc.d"
    printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
      >"$dir.partial/etc/apt/apt.conf.d/90topo-aware"
    echo "deb $m $suite main" >"$dir.partial/etc/apt/sources.list"
    # A testing suite's Release file carries a Valid-Until a week or so ahead; this machine's
    # clock can be past that of the archive it reaches (forky's: "expired (invalid since 30d)").
    # Signatures are still checked; only the freshness date is not.
    [ "$suite" = forky ] && echo 'Acquire::Check-Valid-Until "false";' \
      >>"$dir.partial/etc/apt/apt.conf.d/90topo-aware"
    echo "$suite" >"$dir.partial/.debroot"
    rm -rf "$dir"
    mv "$dir.partial" "$dir"
    echo "$me: $suite root made in $((SECONDS - t0)) s" >&2
  fi
  [ $# -gt 0 ] || return 0
  local missing=() p
  for p in "$@"; do
    chroot "$dir" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "$me: installing in the $suite root: ${missing[*]}" >&2
  in_root "$dir" "" / sh -c 'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq &&
    apt-get install -y -qq "$@" >/dev/null' sh "${missing[@]}"
}

run() {  # dir, [-b path]..., --, cmd...
  local dir=$1; shift
  [ -f "$dir/.debroot" ] || die "$dir is not a root made by debroot.sh create"
  dir=$(cd "$dir" && pwd)
  local binds=$here$'\t'$here p
  binds+=$'\n'$dir/var/cache/topo-aware/build$'\t'$here/build
  if [ -d "$here/../shared" ]; then
    p=$(cd "$here/../shared" && pwd); binds+=$'\n'$p$'\t'$p
  fi
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
      -b) [ $# -ge 2 ] || usage; p=$(cd "$2" && pwd); binds+=$'\n'$p$'\t'$p; shift 2 ;;
      *) usage ;;
    esac
  done
  [ $# -ge 2 ] || usage
  shift
  in_root "$dir" "$binds" "$here" "$@"
}

cmd=$1; shift
case "$cmd" in
  create) [ $# -ge 2 ] || usage; create "$@" ;;
  run) [ $# -ge 1 ] || usage; run "$@" ;;
  *) usage ;;
esac
