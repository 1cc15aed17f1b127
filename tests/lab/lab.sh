#!/usr/bin/env bash
# The topo-aware Slurm lab: a real Slurm cluster on this one machine -- munged, slurmctld and
# four slurmd, each slurmd in its own network namespace (nsenter --net, unshare --uts) behind a
# bridge, topology/tree with two leaves, eight fake GPU character devices per node, and the
# topo-aware plugin in plugstack.conf. Facts this follows: ../shared/reference/slurm-lab.md.
# Each slurmd also has its own mount namespace, where $LAB/local shows $LAB/local.nodeN: files
# put there differ between nodes (srun and the clients see $LAB/local itself), and /etc/hosts
# shows $LAB/etc/hosts: the node names resolve there only after `lab.sh resolve on` (off: names
# do not resolve, as on clusters whose Slurm names are not DNS names).
#
# Usage: tests/lab/lab.sh up [--plugin SO] | down | status | env | plugstack none|ARGS...
#        tests/lab/lab.sh config KEY=VALUE...   (rewrites the plugin's lab config)
#        tests/lab/lab.sh mpi-default none|pmix (slurm.conf MpiDefault, reconfigured live)
#        tests/lab/lab.sh resolve on|off        (the node names in the nodes' /etc/hosts)
# Environment: TOPO_AWARE_LAB (default /tmp/topo-aware-lab), LAB_NODES (4), LAB_CPUS (8),
# LAB_MPI_DEFAULT (none), LAB_CLI_FILTER (a cli_filter.lua: copied beside slurm.conf with
# CliFilterPlugins=cli_filter/lua; clients read it at once, so `up` again changes it live).
# LAB_TOPOLOGY: tree2 (default: two leaves under one spine), none (TopologyPlugin=topology/none,
# no topology.conf) or the path of a topology.conf to use as it is (topology/tree).
# `up` is idempotent: a lab that is already up is reused (the plugin is refreshed). `down`
# stops daemons by PID, kills what still runs in the lab's namespaces, deletes the namespaces,
# the bridge and Slurm's cgroup directories, also after a failed or killed run.
set -euo pipefail

LAB=${TOPO_AWARE_LAB:-/tmp/topo-aware-lab}
NODES=${LAB_NODES:-4}
CPUS=${LAB_CPUS:-8}
TOPOLOGY=${LAB_TOPOLOGY:-tree2}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BR=talab0
NET=10.77.0
say() { echo "lab: $*" >&2; }
die() { echo "lab: error: $*" >&2; exit 1; }

export SLURM_CONF=$LAB/etc/slurm.conf

node_ns() { echo "talab-node$1"; }

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# How long a client waits for slurmctld's reply (slurm.conf MessageTimeout): Slurm's default, 10
# s, on 22.05, where the e2e's 200 sruns at once pass with it; 60 s on later releases, as many
# sites set it. Measured in the lab on 24.11.5 (Debian 13), without topo-aware: of 200 sruns
# started at once, 166 failed with "Unable to allocate resources: Socket timed out on send/recv
# operation" at 10 s, though slurmctld logged about a millisecond for each request it took up;
# none failed at 60 s. Releases between were not measured. LAB_MESSAGE_TIMEOUT overrides.
message_timeout() {
  local v
  [ -z "${LAB_MESSAGE_TIMEOUT:-}" ] || { echo "$LAB_MESSAGE_TIMEOUT"; return; }
  v=$(slurmctld -V 2>/dev/null | grep -oE '[0-9]+\.[0-9]+' | head -1)
  case "$v" in
    1[0-9].*|2[0-2].*) echo 10 ;;
    *) echo 60 ;;
  esac
}

write_configs() {
  local host; host=$(hostname -s)
  mkdir -p "$LAB"/{etc,munge,state,spool,run,log,dev,plugin,jobs}
  for i in $(seq 1 "$NODES"); do mkdir -p "$LAB/tmp/node$i" "$LAB/local.node$i"; done
  mkdir -p "$LAB/local"
  local d
  for d in "$LAB/local" "$LAB"/local.node*; do
    printf '#!/bin/sh\nexit 0\n' >"$d/healthcheck.sh"
    chmod 0755 "$d/healthcheck.sh"
  done
  chmod 1777 "$LAB"/tmp/node*
  chmod 0755 "$LAB" "$LAB/munge"
  chmod 1777 "$LAB/jobs"   # like /tmp: each job's user creates its own 0700 directory here
  {
    echo "# topo-aware lab: $NODES virtual nodes, each slurmd in its own network namespace"
    echo "ClusterName=topoawarelab"
    echo "SlurmctldHost=$host($NET.1)"
    cat <<EOF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$LAB/munge/munge.socket.2
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$LAB/state
SlurmdSpoolDir=$LAB/spool/%n
SlurmctldPidFile=$LAB/run/slurmctld.pid
SlurmdPidFile=$LAB/run/slurmd-%n.pid
SlurmctldLogFile=$LAB/log/slurmctld.log
SlurmdLogFile=$LAB/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
# Each node its own TmpFS (Slurm expands %n): mpi/pmix makes per-step directories there, and
# nodes sharing one /tmp would collide on them.
TmpFS=$LAB/tmp/%n
# A node-local health check (\$LAB/local/healthcheck.sh, a no-op until a test puts another there):
# how a site runs topo-aware doctor --slurm.
HealthCheckProgram=$LAB/local/healthcheck.sh
HealthCheckInterval=5
HealthCheckNodeState=ANY
ProctrackType=proctrack/linuxproc
TaskPlugin=${LAB_TASK_PLUGIN:-task/cgroup}
SwitchType=switch/none
MpiDefault=${LAB_MPI_DEFAULT:-none}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
TopologyPlugin=topology/$([ "$TOPOLOGY" = none ] && echo none || echo tree)
PlugStackConfig=$LAB/etc/plugstack.conf
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
MinJobAge=2
InactiveLimit=0
MessageTimeout=$(message_timeout)
EOF
    for i in $(seq 1 "$NODES"); do
      echo "NodeName=node$i NodeAddr=$NET.$((10 + i)) CPUs=$CPUS RealMemory=2000 Gres=gpu:8 State=UNKNOWN"
    done
    echo "PartitionName=gpu Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
    [ -z "${LAB_CLI_FILTER:-}" ] || echo "CliFilterPlugins=cli_filter/lua"
  } >"$LAB/etc/slurm.conf"
  rm -f "$LAB/etc/cli_filter.lua"
  [ -z "${LAB_CLI_FILTER:-}" ] || cp "$LAB_CLI_FILTER" "$LAB/etc/cli_filter.lua"
  write_topology
  echo "AutoDetect=off" >"$LAB/etc/gres.conf"
  echo "NodeName=node[1-$NODES] Name=gpu File=$LAB/dev/nvidia[0-7]" >>"$LAB/etc/gres.conf"
  cat >"$LAB/etc/cgroup.conf" <<EOF
CgroupPlugin=autodetect
ConstrainDevices=yes
ConstrainCores=no
ConstrainRAMSpace=no
EOF
  # Fake GPUs: Slurm wants character devices; major 195 is NVIDIA's, which is what the devices
  # cgroup (ConstrainDevices) is asked to allow or deny.
  for g in $(seq 0 7); do
    [ -c "$LAB/dev/nvidia$g" ] || { rm -f "$LAB/dev/nvidia$g"; mknod "$LAB/dev/nvidia$g" c 195 "$g"; }
  done
  [ -f "$LAB/etc/topo-aware.toml" ] || write_plugin_config
  [ -f "$LAB/etc/plugstack.conf" ] || write_plugstack "config=$LAB/etc/topo-aware.toml"
  write_hosts off  # names do not resolve until `resolve on`
}

# topology.conf as LAB_TOPOLOGY says: the two-leaf tree, none, or a given file.
write_topology() {
  case $TOPOLOGY in
    tree2)
      local half=$((NODES / 2))
      cat >"$LAB/etc/topology.conf" <<EOF
SwitchName=leaf1 Nodes=node[1-$half]
SwitchName=leaf2 Nodes=node[$((half + 1))-$NODES]
SwitchName=spine Switches=leaf[1-2]
EOF
      ;;
    none) rm -f "$LAB/etc/topology.conf" ;;
    *)
      [ -f "$TOPOLOGY" ] || die "LAB_TOPOLOGY: tree2, none or a topology.conf file, not '$TOPOLOGY'"
      cp "$TOPOLOGY" "$LAB/etc/topology.conf"
      ;;
  esac
}

# The nodes' /etc/hosts (bound over it in each slurmd's mount namespace): this machine's own, and
# with `on` the node names at their addresses. Rewritten in place, so the bind mounts see it.
write_hosts() {
  {
    cat /etc/hosts
    if [ "$1" = on ]; then
      echo "# topo-aware lab: the node names resolve"
      for i in $(seq 1 "$NODES"); do echo "$NET.$((10 + i)) node$i"; done
    fi
  } >"$LAB/etc/hosts.new"
  if [ -f "$LAB/etc/hosts" ]; then
    cat "$LAB/etc/hosts.new" >"$LAB/etc/hosts"
    rm -f "$LAB/etc/hosts.new"
  else
    mv "$LAB/etc/hosts.new" "$LAB/etc/hosts"
  fi
}

# slurm.conf's MpiDefault, taken by srun at once and by the daemons on reconfigure.
set_mpi_default() {
  case $1 in none|pmix) ;; *) die "mpi-default: none or pmix, not '$1'" ;; esac
  sed -i "s/^MpiDefault=.*/MpiDefault=$1/" "$LAB/etc/slurm.conf"
  if pid_alive "$LAB/run/slurmctld.pid"; then
    scontrol reconfigure >/dev/null || die "scontrol reconfigure failed"
    wait_idle 30
  fi
}

# The plugin's lab config: the fabric (H4's lab cluster description when present, else the
# lab's own topology.conf), DGX H100 captures for every node, the lab's job directory.
write_plugin_config() {
  local fabric=$SRC/etc/lab-cluster.toml kv key
  [ -f "$fabric" ] || fabric=$LAB/etc/topology.conf
  declare -A set=([fabric]=$fabric [job_dir]=$LAB/jobs [policy]=fail-open)
  local order=(fabric job_dir policy)
  for kv in "$@"; do
    key=${kv%%=*}
    [ -n "${set[$key]+x}" ] || order+=("$key")
    set[$key]=${kv#*=}
  done
  {
    echo "# Written by tests/lab/lab.sh"
    for key in "${order[@]}"; do
      case ${set[$key]} in
        true|false) echo "$key = ${set[$key]}" ;;
        *) echo "$key = \"${set[$key]}\"" ;;
      esac
    done
    echo
    echo "[[node]]"
    echo "hosts = \"node*\""
    echo "capture = \"$SRC/tests/fixtures/nccl-topo/dgx-h100-topo.xml\""
  } >"$LAB/etc/topo-aware.toml"
}

write_plugstack() {
  if [ "${1:-}" = none ]; then
    : >"$LAB/etc/plugstack.conf"
  else
    echo "required $LAB/plugin/topo_aware.so $*" >"$LAB/etc/plugstack.conf"
  fi
}

start_munge() {
  if pid_alive "$LAB/run/munged.pid"; then return; fi
  if [ ! -s "$LAB/munge/munge.key" ]; then
    dd if=/dev/urandom of="$LAB/munge/munge.key" bs=1024 count=1 status=none
    chmod 0400 "$LAB/munge/munge.key"
  fi
  munged -f --socket="$LAB/munge/munge.socket.2" --key-file="$LAB/munge/munge.key" \
    --pid-file="$LAB/run/munged.pid" --log-file="$LAB/log/munged.log" \
    --seed-file="$LAB/munge/munged.seed"
}

setup_network() {
  if ! ip link show "$BR" >/dev/null 2>&1; then
    ip link add "$BR" type bridge
    ip addr add "$NET.1/24" dev "$BR"
  fi
  ip link set "$BR" up
  for i in $(seq 1 "$NODES"); do
    local ns; ns=$(node_ns "$i")
    # (Output captured first: `ip | grep -q` fails under pipefail when grep exits early.)
    local addrs=""
    [ -e "/run/netns/$ns" ] && addrs=$(nsenter --net="/run/netns/$ns" ip -o addr show 2>/dev/null || true)
    if grep -q "eth0 .*inet $NET.$((10 + i))/" <<<"$addrs"; then
      continue
    fi
    # A slurmd left in a namespace that is about to be replaced would be cut off: stop it.
    kill_pidfile "$LAB/run/slurmd-node$i.pid" 10
    ip netns del "$ns" 2>/dev/null || true
    ip link del "talabv$i" 2>/dev/null || true
    ip netns add "$ns"
    ip link add "talabv$i" type veth peer name eth0 netns "$ns"
    ip link set "talabv$i" master "$BR" up
    nsenter --net="/run/netns/$ns" ip addr add "$NET.$((10 + i))/24" dev eth0
    nsenter --net="/run/netns/$ns" ip link set eth0 up
    nsenter --net="/run/netns/$ns" ip link set lo up
  done
}

start_slurm() {
  if ! pid_alive "$LAB/run/slurmctld.pid"; then
    # -c: a fresh controller state each bring-up, so a lab never inherits drained nodes.
    slurmctld -c -f "$SLURM_CONF" || die "slurmctld did not start (log: $LAB/log/slurmctld.log)"
  fi
  for i in $(seq 1 "$NODES"); do
    local f=$LAB/run/slurmd-node$i.pid
    # Reused only when it still lives in its node's namespace (a re-created namespace cuts off
    # the slurmd left in the old one).
    if pid_alive "$f" && [ "$(stat -L -c %i "/proc/$(cat "$f")/ns/net" 2>/dev/null)" = \
        "$(stat -L -c %i "/run/netns/$(node_ns "$i")" 2>/dev/null)" ]; then
      continue
    fi
    kill_pidfile "$f" 10
    # Its own mount namespace too: $LAB/local is node-local (node i sees $LAB/local.node$i
    # there), for files that differ between nodes.
    if ! nsenter --net="/run/netns/$(node_ns "$i")" unshare --uts --mount --propagation private \
        sh -c "mount --bind '$LAB/local.node$i' '$LAB/local' &&
               mount --bind '$LAB/etc/hosts' /etc/hosts && hostname node$i &&
               exec slurmd -N node$i -f '$SLURM_CONF'"; then
      tail -5 "$LAB/log/slurmd-node$i.log" >&2 || true
      die "slurmd for node$i did not start (log: $LAB/log/slurmd-node$i.log)"
    fi
  done
}

wait_idle() {
  local deadline=$((SECONDS + ${1:-60})) state
  while [ $SECONDS -lt $deadline ]; do
    state=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u || true)
    if [ -n "$state" ] && ! grep -vqE ' (idle|mixed|allocated)$' <<<"$state" &&
        [ "$(wc -l <<<"$state")" -ge "$NODES" ]; then
      return 0
    fi
    if grep -qE ' (drain|drained|down)' <<<"$state"; then
      scontrol update nodename="node[1-$NODES]" state=resume >/dev/null 2>&1 || true
    fi
    sleep 0.2
  done
  say "nodes not idle after ${1:-60}s:"; sinfo -N >&2 || true
  return 1
}

install_plugin() {
  local so=$1
  [ -f "$so" ] || die "plugin $so not found (build target topo_aware_spank)"
  # A copy, replaced atomically: a running slurmstepd keeps the file it mapped.
  cp "$so" "$LAB/plugin/.topo_aware.so.new"
  mv -f "$LAB/plugin/.topo_aware.so.new" "$LAB/plugin/topo_aware.so"
}

cmd_up() {
  local plugin=""
  while [ $# -gt 0 ]; do
    case $1 in
      --plugin) plugin=$2; shift 2 ;;
      *) die "up: unknown argument $1" ;;
    esac
  done
  [ "$(id -u)" -eq 0 ] || die "needs root (namespaces, mknod, daemons)"
  for b in munged slurmctld slurmd srun nsenter unshare ip; do
    command -v "$b" >/dev/null || die "$b not installed (scripts/deps.sh lab)"
  done
  local t0=$SECONDS
  write_configs
  [ -z "$plugin" ] || install_plugin "$plugin"
  start_munge
  setup_network
  start_slurm
  wait_idle 60
  say "up in $((SECONDS - t0))s: $LAB (export SLURM_CONF=$SLURM_CONF)"
}

kill_pidfile() {  # pidfile, seconds to wait
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((${2:-10} * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

cmd_down() {
  [ "$(id -u)" -eq 0 ] || die "needs root"
  # slurmd first: with the controller gone it waits ~10s to send epilog-complete messages.
  for i in $(seq 1 "$NODES"); do kill_pidfile "$LAB/run/slurmd-node$i.pid" 10 & done
  wait
  # Anything still running in a node's namespace was started by this lab (slurmstepd, tasks).
  for i in $(seq 1 "$NODES"); do
    local ns; ns=$(node_ns "$i")
    if [ -e "/run/netns/$ns" ]; then
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    fi
  done
  kill_pidfile "$LAB/run/slurmctld.pid" 10 &
  kill_pidfile "$LAB/run/munged.pid" 5 &
  wait
  for i in $(seq 1 "$NODES"); do
    ip netns del "$(node_ns "$i")" 2>/dev/null || true
    ip link del "talabv$i" 2>/dev/null || true
  done
  ip link del "$BR" 2>/dev/null || true
  # task/cgroup leaves slurm_<node> directories behind in every v1 controller.
  local d
  for d in /sys/fs/cgroup/*/slurm_node* /sys/fs/cgroup/*/slurm; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  say "down: no daemon, namespace or cgroup left"
}

cmd_status() {
  local ok=0
  for f in munged slurmctld $(for i in $(seq 1 "$NODES"); do echo "slurmd-node$i"; done); do
    if pid_alive "$LAB/run/$f.pid"; then echo "$f: up ($(cat "$LAB/run/$f.pid"))"; else echo "$f: down"; ok=1; fi
  done
  return $ok
}

# Lists what a tear-down must leave behind: nothing. Exit 1 when something remains.
cmd_leftovers() {
  local left=0 f
  for f in "$LAB"/run/*.pid; do
    [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && { echo "daemon: $f"; left=1; }
  done
  for i in $(seq 1 "$NODES"); do
    [ -e "/run/netns/$(node_ns "$i")" ] && { echo "netns: $(node_ns "$i")"; left=1; }
  done
  ip link show "$BR" >/dev/null 2>&1 && { echo "bridge: $BR"; left=1; }
  for f in /sys/fs/cgroup/*/slurm_node* /sys/fs/cgroup/*/slurm; do
    [ -d "$f" ] && { echo "cgroup: $f"; left=1; }
  done
  return $left
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  leftovers) cmd_leftovers ;;
  env) echo "export SLURM_CONF=$SLURM_CONF" ;;
  plugstack) shift; write_plugstack "$@" ;;
  config) shift; write_plugin_config "$@" ;;
  install) shift; install_plugin "$1" ;;
  mpi-default) shift; set_mpi_default "${1:-}" ;;
  resolve) shift; case ${1:-} in on|off) write_hosts "$1" ;; *) die "resolve: on or off" ;; esac ;;
  *) echo "usage: lab.sh up [--plugin SO] | down | status | leftovers | env | plugstack none|ARGS... | config KEY=VALUE... | install SO | mpi-default none|pmix | resolve on|off" >&2; exit 2 ;;
esac
