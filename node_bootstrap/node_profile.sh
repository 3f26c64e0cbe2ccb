#!/usr/bin/env bash
# Node profile (docs/network-functions.md): the pool's 2 MiB hugepages and kernel settings.
# Extends the node_prefix_load hook of multus_eni_bootstrap.sh (after node_prefix.sh and
# dual_stack.sh, when those are included too). The renderer puts this file in front of that
# script's `main "$@"` only when MULTUS_NODE_PROFILE_SYSCTLS is set (sysctl.d lines,
# "key = value", vm.nr_hugepages first), so the user-data of other pools stays byte for byte
# as it was.
#
# The user-data runs in cloud-init's final stage, and nodeadm-run.service, which starts the
# kubelet, is ordered After=cloud-final.service (amazon-eks-ami, templates/al2023/runtime/
# rootfs/etc/systemd/system/nodeadm-run.service): the pages exist when the kubelet first counts
# the node's hugepages-2Mi capacity. cloud-init runs user-data on the first boot only, so the
# settings also go to sysctl.d, which systemd-sysctl applies early at every later boot.
#
# Connection-tracking keys exist only once nf_conntrack is loaded, which kube-proxy does later:
# the module is loaded now and listed in modules-load.d, which systemd loads before it applies
# sysctl.d. `sysctl -e` skips keys of interfaces not there yet (a Multus interface appears at
# its attach); udev's rule applies their sysctl.d lines when an interface appears.

readonly NODE_PROFILE_SYSCTLS=${MULTUS_NODE_PROFILE_SYSCTLS:?missing}
readonly NODE_PROFILE_SYSCTL_FILE=$ROOT/etc/sysctl.d/91-node-profile.conf
readonly NODE_PROFILE_MODULES_FILE=$ROOT/etc/modules-load.d/node-profile.conf

node_profile_load() {
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

# Runs the profile first, then the hook's current body.
eval "without_node_profile_$(declare -f node_prefix_load)"
node_prefix_load() { node_profile_load && without_node_profile_node_prefix_load "$@"; }
