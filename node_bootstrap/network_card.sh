#!/usr/bin/env bash
# Networks on another network card (docs/node-bootstrap.md, "Network cards"): wraps two
# functions of multus_eni_bootstrap.sh (after the other libraries). The renderer puts this file
# in front of that script's `main "$@"` only when a network of the pool is on a network card
# other than 0, so the user-data of every other pool stays byte for byte as it was.
#
# EC2 numbers devices per network card: device index 1 of card 1 is another slot than device
# index 1 of card 0, and IMDS's device-number is unique only within a card; its network-card key
# names the card, on multi-card instance types only (404 elsewhere: amazonlinux/
# amazon-ec2-net-utils#104; nodeadm reads a 404 as card 0, cmd/nodeadm-internal/udev/ec2.go).
# The script keys each network's ENI by one device field (MULTUS_NETWORKS); the renderer writes
# it as <device-index>.<card> for a card other than 0 (amazon-ec2-net-utils names such an
# interface device-number-<index>.<card>). This library translates that field where the script
# meets EC2's numbering:
# - IMDS: the device-number of an ENI on card C (C > 0) reads <index>.<C>, so an ENI of another
#   card at the same index is never taken for the network's (re-runs, the dry-host wait);
# - AttachNetworkInterface: DeviceIndex=<index>.<C> goes out as DeviceIndex=<index> and
#   NetworkCardIndex=<C>, and a card-0 attachment carries NetworkCardIndex=0 spelled out: on
#   multi-card instances EC2 checked a free (card 0, index N) slot against the other cards'
#   index N when the parameter was left to its default (cilium/cilium#42512).
# The ClientToken, the state and the log lines keep the device field as it is.

eval "single_card_$(declare -f imds)"
eval "single_card_$(declare -f ec2_call)"

imds() {
  local answer card
  answer=$(single_card_imds "$@") || return
  if [[ $1 =~ ^network/interfaces/macs/([^/]+)/device-number$ ]] &&
    card=$(single_card_imds "network/interfaces/macs/${BASH_REMATCH[1]}/network-card" 2>/dev/null) &&
    [[ $card != 0 ]]; then
    answer+=.$card
  fi
  printf '%s' "$answer"
}

ec2_call() {
  if [[ $1 != AttachNetworkInterface ]]; then
    single_card_ec2_call "$@"
    return
  fi
  local parameter parameters=()
  for parameter in "${@:2}"; do
    if [[ $parameter =~ ^DeviceIndex=([0-9]+)\.([0-9]+)$ ]]; then
      parameters+=("DeviceIndex=${BASH_REMATCH[1]}" "NetworkCardIndex=${BASH_REMATCH[2]}")
    elif [[ $parameter == DeviceIndex=* ]]; then
      parameters+=("$parameter" NetworkCardIndex=0)
    else
      parameters+=("$parameter")
    fi
  done
  single_card_ec2_call AttachNetworkInterface "${parameters[@]}"
}
