#!/usr/bin/env bash
# node_prefix networks (docs/node-prefix-mode.md): overrides the no-op node_prefix_* hooks of
# multus_eni_bootstrap.sh. The renderer puts this file in front of that script's `main "$@"`
# only when MULTUS_NODE_PREFIX has lines, keeping other nodes' user-data small.
#
# The ENI's create call asks for the network's /28 prefixes (Ipv4PrefixCount, no extra round
# trip); every prefix must lie inside the network's reservation, else the ENI (and with it its
# prefixes) is deleted and the network fails. Once the interface is up, a CNI config for
# host-local over those prefixes is written atomically; a re-run reads the prefixes from IMDS
# and rewrites the same file. All of this happens before the readiness marker.

readonly CNI_CONFIG_DIR=$ROOT${MULTUS_CNI_CONFIG_DIR:?missing}
readonly IPAM_DATA_DIR=${MULTUS_IPAM_DATA_DIR:?missing}

# This AZ's node_prefix networks from MULTUS_NODE_PREFIX, by interface name.
node_prefix_load() {
  local node_az=$1 line_az ifname rest
  declare -gA node_prefix_by_ifname=()
  while read -r line_az ifname rest; do
    if [[ $line_az == "$node_az" ]]; then
      node_prefix_by_ifname[$ifname]=$rest
    fi
  done <<<"$MULTUS_NODE_PREFIX"
  mkdir -p "$CNI_CONFIG_DIR"
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
}

ipv4_to_int() {
  local IFS=. a b c d
  read -r a b c d <<<"$1"
  printf '%d' $(((a << 24) | (b << 16) | (c << 8) | d))
}

int_to_ipv4() {
  printf '%d.%d.%d.%d' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255))
}

# Whether <prefix> is a /28 (aligned, as EC2 delegates them) inside <reservation-cidr>.
prefix_in_reservation() {
  local prefix=$1 reservation=$2 start length reservation_start
  [[ $prefix =~ ^([0-9]{1,3}\.){3}[0-9]{1,3}/28$ ]] || return 1
  start=$(ipv4_to_int "${prefix%/*}")
  length=${reservation#*/}
  reservation_start=$(ipv4_to_int "${reservation%/*}")
  ((start % 16 == 0 && start >> (32 - length) == reservation_start >> (32 - length)))
}

# Prints the text of every <$1> element of $ec2_response, one per line.
xml_values() {
  local rest=$ec2_response pattern="<$1>([^<]*)</$1>"
  while [[ $rest =~ $pattern ]]; do
    printf '%s\n' "${BASH_REMATCH[1]}"
    rest=${rest#*"${BASH_REMATCH[0]}"}
  done
}

# Checks that the prefixes (one per line in $3) are exactly $2 /28s inside reservation $4.
check_prefixes() {
  local ifname=$1 count=$2 prefixes=$3 reservation=$4 prefix found=0
  for prefix in $prefixes; do
    found=$((found + 1))
    if ! prefix_in_reservation "$prefix" "$reservation"; then
      log "$ifname: prefix $prefix is not a /28 inside the reservation $reservation"
      return 1
    fi
  done
  ((found == count)) || {
    log "$ifname: expected $count prefixes inside $reservation, got $found"
    return 1
  }
}

# Writes the node-local CNI config of a node_prefix network: ipvlan on its interface, host-local
# handing out the prefixes (one range per prefix, one address per pod), sbr. Multus reads it
# for the NAD whose name equals "name". Written to a temporary file and renamed, so Multus and
# the container runtime never see half a file.
write_node_prefix_config() {
  local ifname=$1 name=$2 subnet=$3 gateway=$4 mode=$5 file=$6 prefixes=$7 prefix first
  local ranges=() range
  while read -r prefix; do
    first=$(ipv4_to_int "${prefix%/*}")
    printf -v range '{"subnet": "%s", "rangeStart": "%s", "rangeEnd": "%s", "gateway": "%s"}' \
      "$subnet" "$(int_to_ipv4 "$first")" "$(int_to_ipv4 $((first + 15)))" "$gateway"
    ranges+=("$range")
  done < <(sort -t . -k1,1n -k2,2n -k3,3n -k4,4n <<<"$prefixes")
  local IFS=,
  printf '{"cniVersion": "0.3.1", "name": "%s", "plugins": [{"type": "ipvlan", "master": "%s", "mode": "%s", "ipam": {"type": "host-local", "dataDir": "%s", "ranges": [[%s]]}}, {"type": "sbr"}]}\n' \
    "$name" "$ifname" "$mode" "$IPAM_DATA_DIR" "${ranges[*]}" >"$CNI_CONFIG_DIR/.$file.tmp"
  mv -f "$CNI_CONFIG_DIR/.$file.tmp" "$CNI_CONFIG_DIR/$file"
  log "$ifname: wrote $CNI_CONFIG_DIR/$file for $name ($(wc -w <<<"$prefixes") prefixes)"
}

