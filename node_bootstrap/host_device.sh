#!/usr/bin/env bash
# host-device networks (docs/network.md, Whole-ENI networks): overrides the no-op host_device_*
# hooks of multus_eni_bootstrap.sh. The renderer puts this file (after node_cni_config.sh) in
# front of that script's `main "$@"` only when MULTUS_HOST_DEVICE has lines.
#
# Each ENI of a host-device network is attached like any Multus ENI (its own line in
# MULTUS_NETWORKS, named <interface><slot>); once it is up, this writes the node-local CNI
# config through which Multus gives it whole to one pod, for the NAD <network>-<az>-<slot>
# (whose spec has no config). The host-device plugin (containernetworking/plugins v1.9.1,
# plugins/main/host-device/host-device.go) finds the link by "device", moves it into the pod's
# network namespace, renames it to the pod's interface name (the host name kept as its alias),
# brings it up and applies the static IPAM result to it; on DEL it moves it back under its
# host name. The static IPAM gives the ENI's primary IPv4 address (IMDS local-ipv4s lists it
# first; no EC2 call, and a re-run reads the same) with the subnet's prefix length, the VPC
# router as gateway, and the network's routes via that router.

# This AZ's host-device ENIs from MULTUS_HOST_DEVICE, by interface name.
host_device_load() {
  declare -gA host_device_by_ifname=()
  load_node_cni_networks "$1" "$MULTUS_HOST_DEVICE" host_device_by_ifname
}

# Sees attach_network's locals (mac). IMDS may list a just-attached ENI a moment after the
# kernel shows it, hence imds_wait.
host_device_up() {
  [[ -n ${host_device_by_ifname[$1]:-} ]] || return 0
  local cni_name prefix_length gateway cni_file routes addresses route json_routes=()
  read -r cni_name prefix_length gateway cni_file routes <<<"${host_device_by_ifname[$1]}"
  addresses=$(imds_wait "network/interfaces/macs/$mac/local-ipv4s") || {
    log "$1: IMDS lists no IPv4 address of $mac"
    return 1
  }
  if [[ $routes != - ]]; then
    for route in ${routes//,/ }; do
      json_routes+=("{\"dst\":\"$route\",\"gw\":\"$gateway\"}")
    done
  fi
  local IFS=,
  printf '{"cniVersion":"0.3.1","name":"%s","type":"host-device","device":"%s","ipam":{"type":"static","addresses":[{"address":"%s/%s","gateway":"%s"}],"routes":[%s]}}\n' \
    "$cni_name" "$1" "${addresses%%$'\n'*}" "$prefix_length" "$gateway" "${json_routes[*]}" \
    >"$CNI_STAGE_DIR/$cni_file"
  install_node_cni_config "$cni_file"
  log "$1: CNI config $cni_file for $cni_name staged in $CNI_STAGE_DIR"
}
