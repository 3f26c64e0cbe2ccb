#!/usr/bin/env bash
# Dual-stack networks (docs/node-bootstrap.md, "Dual-stack networks"): extends hooks of
# multus_eni_bootstrap.sh (after node_prefix.sh, when that is included too). The renderer puts
# this file in front of that script's `main "$@"` only when MULTUS_IPV6_INTERFACES is set
# (the interface names of the dual-stack networks, space-separated), so the user-data of nodes
# without a dual-stack network stays byte for byte as it was.
#
# The ENI of a dual-stack network is created with one IPv6 address of its subnet's /64
# (Ipv6AddressCount=1, as the seed does): the ENI's own, as its primary IPv4 address is. Pods'
# addresses come later, from the pod IP agent, out of a range reserved inside the /64.
#
# Router advertisements are not accepted on these interfaces (accept_ra = 0). The VPC router
# advertises itself on IPv6 subnets (instances learn their IPv6 default route from its router
# advertisements: canonical/cloud-init#3980), and an interface that accepts them gets a
# default route (and whatever the advertisement carries) in the host's main table: the host's IPv6 traffic would then leave through a Multus ENI, whose
# security group and routes are the network's, not the node's. The host uses no Multus
# interface (it has no address or route there); pods reach the network through ipvlan, whose
# routes their CNI chain sets. The setting is in sysctl.d, which systemd's udev rule
# (99-systemd.rules: systemd-sysctl --prefix=/net/ipv6/conf/$name) applies whenever the
# interface appears, at this attach and every boot, and it is set again once the link is up.

readonly DUAL_STACK_INTERFACES=${MULTUS_IPV6_INTERFACES:?missing}
readonly DUAL_STACK_SYSCTL_FILE=$ROOT/etc/sysctl.d/90-multus-eni-ipv6.conf

# Keeps a hook's current body and runs `addition` after it: extend_hook <hook> <addition>
extend_hook() {
  local definition
  definition=$(declare -f "$1")
  eval "single_stack_$definition"
  eval "$1() { single_stack_$1 \"\$@\" && $2 \"\$@\"; }"
}

dual_stack() { [[ " $DUAL_STACK_INTERFACES " == *" $1 "* ]]; }

dual_stack_load() {
  local ifname
  for ifname in $DUAL_STACK_INTERFACES; do
    printf 'net.ipv6.conf.%s.accept_ra = 0\n' "$ifname"
  done >"$DUAL_STACK_SYSCTL_FILE"
}

dual_stack_create_args() {
  dual_stack "$1" || return 0
  create+=(Ipv6AddressCount=1)
}

dual_stack_up() {
  dual_stack "$1" || return 0
  run_on_host sysctl -qw "net.ipv6.conf.$1.accept_ra=0"
}

extend_hook node_prefix_load dual_stack_load
extend_hook node_prefix_create_args dual_stack_create_args
extend_hook node_prefix_up dual_stack_up
