#!/usr/bin/env bash
# Node-local CNI configs (node_prefix.sh, host_device.sh): Multus reads the config of a NAD
# without spec.config from its confDir, the host's /etc/cni/net.d (charts/multus.py), picking
# the file whose "name" is the NAD's (network-attachment-definition-client
# pkg/utils/cniconfig.go, GetCNIConfigFromFile). The renderer puts this file in front of
# those libraries when either is included.

readonly CNI_CONFIG_DIR=$ROOT${MULTUS_CNI_CONFIG_DIR:?missing}
readonly RUNTIME_CNI_CONFIG=${MULTUS_RUNTIME_CNI_CONFIG:?missing}
readonly CNI_STAGE_DIR=$STATE_DIR/cni
readonly UNIT_DIR=$ROOT/etc/systemd/system

# Fills the associative array named $3 with the lines of $2 ("<az> <interface> <fields...>",
# one per line) that are for AZ $1, by interface; makes the directories the configs go to.
load_node_cni_networks() {
  local node_az=$1 lines=$2 line_az ifname rest
  local -n by_ifname=$3
  while read -r line_az ifname rest; do
    if [[ $line_az == "$node_az" ]]; then
      by_ifname["$ifname"]=$rest
    fi
  done <<<"$lines"
  mkdir -p "$CNI_CONFIG_DIR" "$CNI_STAGE_DIR" "$UNIT_DIR"
}

# The container runtime takes the first config file in the directory as the pod network, so
# ours must never be alone there. In user-data, before kubelet, the VPC CNI's file is not there
# yet; then a systemd path unit installs ours once it is. The service remains active after its
# copy, or the path unit, finding the file still there, would start it again at once
# (systemd.path(5)). Copies end in .tmp (not a CNI config extension) and are renamed into
# place: nobody reads half a file.
install_node_cni_config() {
  local live=${CNI_CONFIG_DIR#"$ROOT"}/$1 unit=cni-${1%.*}
  if [[ -e $CNI_CONFIG_DIR/$RUNTIME_CNI_CONFIG ]]; then
    cp -f "$CNI_STAGE_DIR/$1" "$ROOT$live.tmp"
    mv -f "$ROOT$live.tmp" "$ROOT$live"
    return
  fi
  printf '[Path]\nPathExists=%s\n\n[Install]\nWantedBy=multi-user.target\n' \
    "${CNI_CONFIG_DIR#"$ROOT"}/$RUNTIME_CNI_CONFIG" >"$UNIT_DIR/$unit.path"
  printf '[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh -c "cp -f %s %s.tmp && mv -f %s.tmp %s"\n' \
    "${CNI_STAGE_DIR#"$ROOT"}/$1" "$live" "$live" "$live" >"$UNIT_DIR/$unit.service"
  run_on_host systemctl daemon-reload
  run_on_host systemctl enable --now --no-block "$unit.path"
}
