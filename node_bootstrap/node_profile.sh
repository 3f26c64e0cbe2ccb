#!/usr/bin/env bash
# Node profile (docs/network-functions.md): the pool's 2 MiB hugepages and kernel settings, the
# CPU list of a reserved_cpus count, and irqbalance's banned CPUs. Extends the node_prefix_load
# hook of multus_eni_bootstrap.sh (after node_prefix.sh and dual_stack.sh, when those are
# included too). The renderer puts this file in front of that script's `main "$@"` only when it
# sets one of the MULTUS_NODE_PROFILE_* variables, so the user-data of other pools stays byte
# for byte as it was:
#   SYSCTLS: sysctl.d lines, "key = value", vm.nr_hugepages first;
#   RESERVED_CPU_COUNT: how many CPUs the kubelet keeps for the system (reservedSystemCPUs);
#   IRQ_CPUS: the CPUs irqbalance may put interrupts on, a CPU list, or "count" for the list
#     this script makes of RESERVED_CPU_COUNT.
#
# The user-data runs in cloud-init's final stage, and nodeadm-run.service, which starts the
# kubelet, is ordered After=cloud-final.service (amazon-eks-ami, templates/al2023/runtime/
# rootfs/etc/systemd/system/nodeadm-run.service): the pages exist when the kubelet first counts
# the node's hugepages-2Mi capacity, and the kubelet drop-in is there when it first reads its
# configuration. cloud-init runs user-data on the first boot only, so everything goes to files
# that later boots read: sysctl.d (systemd-sysctl applies it early at every boot), the kubelet's
# config.json.d and irqbalance's unit drop-in.
#
# Connection-tracking keys exist only once nf_conntrack is loaded, which kube-proxy does later:
# the module is loaded now and listed in modules-load.d, which systemd loads before it applies
# sysctl.d. `sysctl -e` skips keys of interfaces not there yet (a Multus interface appears at
# its attach); udev's rule applies their sysctl.d lines when an interface appears.

readonly NODE_PROFILE_SYSCTLS=${MULTUS_NODE_PROFILE_SYSCTLS:-}
readonly NODE_PROFILE_RESERVED_CPU_COUNT=${MULTUS_NODE_PROFILE_RESERVED_CPU_COUNT:-}
readonly NODE_PROFILE_IRQ_CPUS=${MULTUS_NODE_PROFILE_IRQ_CPUS:-}
readonly NODE_PROFILE_SYSCTL_FILE=$ROOT/etc/sysctl.d/91-node-profile.conf
readonly NODE_PROFILE_MODULES_FILE=$ROOT/etc/modules-load.d/node-profile.conf
readonly NODE_PROFILE_CPU_DIR=$ROOT/sys/devices/system/cpu
# After nodeadm's 40-nodeadm.conf: the kubelet merges the directory's *.conf in name order.
readonly NODE_PROFILE_KUBELET_DROPIN=$ROOT/etc/kubernetes/kubelet/config.json.d/50-multus-node-profile.conf
readonly NODE_PROFILE_IRQBALANCE_DROPIN=$ROOT/etc/systemd/system/irqbalance.service.d/50-multus-node-profile.conf

node_profile_sysctls() {
  mkdir -p "${NODE_PROFILE_SYSCTL_FILE%/*}"
  printf '%s\n' "$NODE_PROFILE_SYSCTLS" >"$NODE_PROFILE_SYSCTL_FILE"
  if [[ $NODE_PROFILE_SYSCTLS == *net.netfilter.* ]]; then
    mkdir -p "${NODE_PROFILE_MODULES_FILE%/*}"
    printf 'nf_conntrack\n' >"$NODE_PROFILE_MODULES_FILE"
    run_on_host modprobe nf_conntrack
  fi
  run_on_host sysctl -q -e -p "$NODE_PROFILE_SYSCTL_FILE"
  log "node profile: applied $NODE_PROFILE_SYSCTL_FILE"
}

# The CPUs of a Linux CPU list ("0-1,4"), one per line.
node_profile_cpus() {
  local item
  local -a items
  IFS=, read -ra items <<<"$1"
  for item in "${items[@]}"; do
    seq "${item%-*}" "${item#*-}"
  done
}

# The first $1 online CPUs taken a whole core at a time (a CPU with its hyperthread siblings),
# cores in the order of their lowest CPU, as a sorted comma-separated list: the cores the
# kubelet's static policy would reserve itself for a CPU count (cpumanager policy_static.go,
# takeByTopology), so full_pcpus_only leaves pods whole cores.
node_profile_reserved_cpus() {
  local count=$1 cpu sibling
  local -A taken=()
  local -a reserved=()
  for cpu in $(node_profile_cpus "$(<"$NODE_PROFILE_CPU_DIR/online")"); do
    [[ -z ${taken[$cpu]:-} ]] || continue
    for sibling in $(node_profile_cpus "$(<"$NODE_PROFILE_CPU_DIR/cpu$cpu/topology/thread_siblings_list")"); do
      ((${#reserved[@]} < count)) || break 2
      taken[$sibling]=1
      reserved+=("$sibling")
    done
  done
  ((${#reserved[@]} == count)) ||
    die "node profile: cannot reserve $count CPUs of $(<"$NODE_PROFILE_CPU_DIR/online")" >&2
  printf '%s\n' "${reserved[@]}" | sort -n | paste -sd,
}

node_profile_kubelet_dropin() {
  mkdir -p "${NODE_PROFILE_KUBELET_DROPIN%/*}"
  printf '{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "reservedSystemCPUs": "%s"}\n' \
    "$1" >"$NODE_PROFILE_KUBELET_DROPIN"
  log "node profile: reservedSystemCPUs $1 in $NODE_PROFILE_KUBELET_DROPIN"
}

# irqbalance puts no interrupt on a CPU of IRQBALANCE_BANNED_CPULIST, which it reads from its
# environment (irqbalance cputree.c, setup_banned_cpus); a unit drop-in sets it whichever
# EnvironmentFile the distribution's unit names. Interrupts whose affinity the kernel does not
# let user space change (managed IRQs) stay where the kernel put them.
node_profile_irq_balance() {
  local cpu
  local -A allowed=()
  local -a banned=()
  for cpu in $(node_profile_cpus "$1"); do allowed[$cpu]=1; done
  for cpu in $(node_profile_cpus "$(<"$NODE_PROFILE_CPU_DIR/online")"); do
    [[ -n ${allowed[$cpu]:-} ]] || banned+=("$cpu")
  done
  mkdir -p "${NODE_PROFILE_IRQBALANCE_DROPIN%/*}"
  printf '[Service]\nEnvironment=IRQBALANCE_BANNED_CPULIST=%s\n' "$(IFS=, && echo "${banned[*]}")" \
    >"$NODE_PROFILE_IRQBALANCE_DROPIN"
  run_on_host systemctl daemon-reload
  # A running irqbalance moves its interrupts off the banned CPUs once restarted; without the
  # package (no unit) the drop-in waits for it.
  run_on_host systemctl try-restart irqbalance.service ||
    log "node profile: irqbalance.service not restarted (not installed?)"
  log "node profile: irqbalance keeps interrupts on CPUs $1"
}

node_profile_load() {
  local reserved_list=$NODE_PROFILE_IRQ_CPUS
  [[ -z $NODE_PROFILE_SYSCTLS ]] || node_profile_sysctls
  if [[ -n $NODE_PROFILE_RESERVED_CPU_COUNT ]]; then
    reserved_list=$(node_profile_reserved_cpus "$NODE_PROFILE_RESERVED_CPU_COUNT") || exit 1
    node_profile_kubelet_dropin "$reserved_list"
  fi
  [[ -z $NODE_PROFILE_IRQ_CPUS ]] || node_profile_irq_balance "$reserved_list"
}

# Runs the profile first, then the hook's current body.
eval "without_node_profile_$(declare -f node_prefix_load)"
node_prefix_load() { node_profile_load && without_node_profile_node_prefix_load "$@"; }
