#!/usr/bin/env bash
# node_prefix networks (docs/node-prefix-mode.md): overrides the no-op node_prefix_* hooks of
# multus_eni_bootstrap.sh. The renderer puts this file in front of that script's `main "$@"`
# only when MULTUS_NODE_PREFIX has lines, keeping other nodes' user-data small.
#
# The ENI's create call asks for the network's /28 prefixes (Ipv4PrefixCount, no extra round
# trip); every prefix must lie inside the network's reservation, else the ENI (and with it its
# prefixes) is deleted and the network fails. Once the interface is up, a CNI config for
# host-local over those prefixes is staged and installed into the CNI config directory as
# soon as the VPC CNI's config is there (install_node_cni_config); a re-run reads the
# prefixes from IMDS and rewrites the same file (node_cni_config.sh installs it). Staging
# happens before the readiness marker; cleartaints also waits for the installed file.

readonly IPAM_DATA_DIR=${MULTUS_IPAM_DATA_DIR:?missing}

# This AZ's node_prefix networks from MULTUS_NODE_PREFIX, by interface name.
node_prefix_load() {
  declare -gA node_prefix_by_ifname=()
  load_node_cni_networks "$1" "$MULTUS_NODE_PREFIX" node_prefix_by_ifname
}

# Sets prefix_count cni_name prefix_subnet reservation gateway mode cni_file for a network;
# fails for a network in whereabouts mode.
node_prefix_settings() {
  [[ -n ${node_prefix_by_ifname[$1]:-} ]] || return 1
  read -r prefix_count cni_name prefix_subnet reservation gateway mode cni_file \
    <<<"${node_prefix_by_ifname[$1]}"
}

node_prefix_create_args() {
  node_prefix_settings "$1" || return 0
  create+=("Ipv4PrefixCount=$prefix_count")
}

# After CreateNetworkInterface: the prefixes of its answer.
node_prefix_created() {
  node_prefix_settings "$1" || return 0
  node_prefixes=$(xml_values ipv4Prefix)
  check_prefixes "$1" "$prefix_count" "$node_prefixes" "$reservation"
}

# An ENI attached by an earlier run: its prefixes from IMDS (no EC2 call).
node_prefix_attached() {
  node_prefix_settings "$1" || return 0
  node_prefixes=$(imds "network/interfaces/macs/$mac/ipv4-prefix" 2>/dev/null) || node_prefixes=""
  check_prefixes "$1" "$prefix_count" "$node_prefixes" "$reservation"
}

node_prefix_up() {
  node_prefix_settings "$1" || return 0
  write_node_prefix_config "$1" "$cni_name" "$prefix_subnet" "$gateway" "$mode" "$cni_file" \
    "$node_prefixes"
  install_node_cni_config "$cni_file"
  log "$1: CNI config $cni_file for $cni_name staged in $CNI_STAGE_DIR"
}

ipv4_to_int() {
  local IFS=. a b c d
  read -r a b c d <<<"$1"
  echo $(((a << 24) | (b << 16) | (c << 8) | d))
}

# Checks that the prefixes ($3, one per line) are exactly $2 aligned /28s inside reservation $4.
check_prefixes() {
  local prefix found=0 start length=${4#*/} first
  first=$(ipv4_to_int "${4%/*}")
  for prefix in $3; do
    found=$((found + 1))
    start=-1
    [[ $prefix =~ ^([0-9]+\.){3}[0-9]+/28$ ]] && start=$(ipv4_to_int "${prefix%/*}")
    if ((start < 0 || start % 16 || start >> (32 - length) != first >> (32 - length))); then
      log "$1: prefix $prefix is not a /28 inside the reservation $4"
      return 1
    fi
  done
  ((found == $2)) || {
    log "$1: expected $2 prefixes inside $4, got $found"
    return 1
  }
}

# Prints the text of every <$1> element of $ec2_response, one per line.
xml_values() {
  local rest=$ec2_response pattern="<$1>([^<]*)</$1>"
  while [[ $rest =~ $pattern ]]; do
    echo "${BASH_REMATCH[1]}"
    rest=${rest#*"${BASH_REMATCH[0]}"}
  done
}

# write_node_prefix_config <interface> <cni-name> <subnet> <gateway> <ipvlan-mode> <file>
# <prefixes>: the node-local CNI config: ipvlan on the interface, host-local handing out the
# prefixes (one range per prefix in one range set: one address per pod), sbr. Multus reads it
# for the NAD whose name equals "name". Staged, then installed (install_node_cni_config).
# A /28 is aligned, so its last address only differs in the last octet.
write_node_prefix_config() {
  local ranges=() range a b c d _
  while IFS=./ read -r a b c d _; do
    printf -v range '{"subnet":"%s","rangeStart":"%s","rangeEnd":"%s","gateway":"%s"}' \
      "$3" "$a.$b.$c.$d" "$a.$b.$c.$((d + 15))" "$4"
    ranges+=("$range")
  done < <(sort -V <<<"$7")
  local IFS=,
  printf '{"cniVersion":"0.3.1","name":"%s","plugins":[{"type":"ipvlan","master":"%s","mode":"%s","ipam":{"type":"host-local","dataDir":"%s","ranges":[[%s]]}},{"type":"sbr"}]}\n' \
    "$2" "$1" "$5" "$IPAM_DATA_DIR" "${ranges[*]}" >"$CNI_STAGE_DIR/$6"
}
