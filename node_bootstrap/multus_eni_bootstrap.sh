#!/usr/bin/env bash
# Multus ENI node bootstrap: attaches one extra ENI per Multus network to this EC2 instance.
#
# Runs as EC2NodeClass user-data (Amazon Linux 2023) before kubelet starts. The renderer
# (node_bootstrap/renderer.py) puts a data-only block in front of this script:
#   MULTUS_CLUSTER_NAME  cluster name, tagged on every ENI
#   MULTUS_*_TAG_KEY     keys of the cluster, owner, network, instance and VPC-CNI no_manage
#                        tags (the node role may only touch ENIs carrying the owner tag), and
#                        of the failure tag (the only tag the node may put on its instance)
#   MULTUS_NETWORKS      one line per network: <network> <interface-name> <device-index>
#                        <source-dest-check> (true: EC2's default is kept; false: turned off)
#                        <mtu> (the network's: its routes' narrowest path, or the config's)
#                        <security-group,...> (that network's ENI's groups)
#   MULTUS_PLACEMENTS    one line per AZ: <az> <subnet,...>
#                        (one subnet per network, in MULTUS_NETWORKS order)
#   MULTUS_NODE_PREFIX   only with node_prefix networks (node_prefix.sh): one line per
#                        (AZ, network): <az> <interface-name> <prefix-count> <cni-network-name>
#                        <subnet-cidr> <reservation-cidr> <gateway> <ipvlan-mode> <cni-file>
#   MULTUS_HOST_DEVICE   only with host-device networks (host_device.sh): one line per (AZ,
#                        ENI): <az> <interface-name> <cni-network-name> <subnet-prefix-length>
#                        <gateway> <cni-file> <route,...|->
#   MULTUS_CNI_CONFIG_DIR, MULTUS_IPAM_DATA_DIR  where node-local CNI configs and leases go
#   MULTUS_CONNECTION_TRACKING  only where a network sets timeouts: one line per interface:
#                        <interface-name> <member>=<seconds>... (members of CreateNetworkInterface's
#                        ConnectionTrackingSpecification, e.g. TcpEstablishedTimeout=3600)
#
# Environment overrides, for tests and benchmarks:
#   MULTUS_IMDS_URL      IMDS base URL (default http://169.254.169.254)
#   MULTUS_EC2_ENDPOINT  EC2 endpoint URL (default https://ec2.<region>.<IMDS services/domain>)
#   MULTUS_ROOT          prefix of every file written (.link, .network, udev rule, sysctl.d,
#                        state, marker, log)
#   MULTUS_HOST_CHANGES  0 selects dry-host mode; anything else (default) runs udevadm, networkctl,
#                        sysctl, ip
#   MULTUS_WAIT_SECONDS  how long an attached interface may take to appear (default 60)
#   MULTUS_CREDENTIALS_WAIT_SECONDS  how long IMDS may take to serve the instance profile's
#                        credentials (default 120; early in boot it answers 404)
#
# Dry-host mode (MULTUS_HOST_CHANGES=0) lets the script run unprivileged: files are still
# written under MULTUS_ROOT, host commands are appended to
# $MULTUS_ROOT/var/lib/multus-eni/host-commands instead of being run, and an interface counts
# as present once IMDS lists its MAC at the expected device number. On a real host it counts
# as present once /sys/class/net/<interface-name> carries that MAC. The console line and the
# shutdown a fatal error requests are host commands too.
#
# Per network, on a fresh node: create the ENI with its tags (1 EC2 call), write a systemd
# .link file naming it by MAC and a .network file leaving it unmanaged, attach it (1), then set
# DeleteOnTermination and, where the network asks for it, turn the source/dest check off,
# concurrently (1-2). Networks run in parallel.
#
# The host leaves Multus interfaces alone: the AMI's udev rule hands every ENA interface that
# appears before nodeadm's run phase (i.e. during user-data) to systemd-networkd with nodeadm's
# /run/systemd/network/70-eks-<interface>.network: DHCP, main-table routes, a policy table.
# networkd applies the first .network file in name order that matches, across /etc, /run and
# /usr/lib, so 10-multus-<interface>.network (matching the ENI's permanent MAC, Unmanaged=yes)
# wins; it is loaded before the attach. The interface gets no address, route or rule on the
# host; this script brings the link up, and so does a udev rule at every later boot. Pods reach
# the network through ipvlan l2, which needs nothing on the host.
#
# nodeadm also records that answer per interface, in /etc/eks/nodeadm/udev-net-manager/
# <instance-id>/<interface>, reads the record before deciding, and at every boot its boot hook
# waits up to a minute for each interface recorded as networkd's to be "configured", then
# fails; an unmanaged one never is. So before the attach this script records each Multus
# interface as the CNI's ("cni"): the net manager then leaves it alone at this attach and at
# every boot, and the boot hook does not wait for it.
#
# EC2 calls go to the EC2 Query API through curl, signed with SigV4 by curl itself from the
# instance profile's credentials in IMDS. An aws CLI process costs about half a CPU-second to
# start, and a fresh node has few cores and a kubelet to start, so a call costs one curl
# process instead. Credentials reach curl through a pipe, never through its arguments.
#
# Re-runs create nothing: IMDS (no EC2 call) tells which device indexes hold an ENI from the
# expected subnet, and $STATE_DIR/<interface>.eni records that its attachment was fully
# configured. An attached ENI without that record gets its attributes set again.
# On failure, ENIs created by this run are deleted (detached first when already attached).
#
# Throttling, 5xx, connection failures and settling errors are retried with exponential
# backoff and full jitter. Exit status is 0 only when every interface is attached and up; only
# then is the readiness marker written.
#
# Any fatal error (die, a failed command under set -e, a network that could not be attached)
# ends in on_fatal_exit: after the error is logged, its reason (the run's first failure, one
# line: the network, the failed step and EC2's error code and message, or what timed out) goes
# to the console (EC2's console output)
# as "multus-eni-bootstrap-failure: <reason>" and, best effort, into the instance's tag
# MULTUS_FAILURE_TAG_KEY; every unattached ENI tagged with this instance is deleted (also one
# whose creation answer was lost), then the node powers itself off. kubelet would otherwise
# register a node that keeps the Multus startup taint forever; Karpenter sees the instance stop
# (interruption queue) and replaces it.
#
# node_prefix networks (docs/node-prefix-mode.md) are handled by node_prefix.sh through the
# node_prefix_* hooks: prefixes in the create call, checked against the reservation, and the
# node-local CNI config, all before the readiness marker. A host-device network's ENIs are
# attached like the others, one line each; host_device.sh's hooks write each one's node-local
# CNI config, also before the marker (docs/network.md, Whole-ENI networks).
set -euo pipefail

readonly IMDS_URL=${MULTUS_IMDS_URL:-http://169.254.169.254}
readonly EC2_ENDPOINT=${MULTUS_EC2_ENDPOINT:-}
readonly ROOT=${MULTUS_ROOT:-}
readonly HOST_CHANGES=${MULTUS_HOST_CHANGES:-1}
readonly WAIT_SECONDS=${MULTUS_WAIT_SECONDS:-60}
readonly CONNECTION_TRACKING=${MULTUS_CONNECTION_TRACKING:-}

readonly STATE_DIR=$ROOT/var/lib/multus-eni
readonly READY_MARKER=$STATE_DIR/ready
readonly HOST_COMMAND_LOG=$STATE_DIR/host-commands
readonly LOG_FILE=$ROOT/var/log/multus-eni-bootstrap.log
readonly LINK_DIR=$ROOT/etc/systemd/network
readonly RULES_DIR=$ROOT/etc/udev/rules.d
# nodeadm's record of which manager owns each interface (nodeadm-internal udev/broker.go).
readonly NODEADM_NET_MANAGER_DIR=$ROOT/etc/eks/nodeadm/udev-net-manager
readonly SYSCTL_FILE=$ROOT/etc/sysctl.d/90-multus-eni.conf

# Tag keys come from the renderer, which the node role's IAM conditions also use.
readonly CLUSTER_TAG_KEY=${MULTUS_CLUSTER_TAG_KEY:?missing configuration block}
readonly OWNER_TAG_KEY=${MULTUS_OWNER_TAG_KEY:?missing}
readonly NETWORK_TAG_KEY=${MULTUS_NETWORK_TAG_KEY:?missing}
readonly INSTANCE_TAG_KEY=${MULTUS_INSTANCE_TAG_KEY:?missing}
readonly NO_MANAGE_TAG_KEY=${MULTUS_NO_MANAGE_TAG_KEY:?missing}
readonly FAILURE_TAG_KEY=${MULTUS_FAILURE_TAG_KEY:?missing}
readonly EC2_API_VERSION=2016-11-15
readonly EC2_MAX_ATTEMPTS=8
# Failures worth another attempt: any HTTP 5xx; these error codes, which are throttling
# (whatever their status) or mean "EC2 has not caught up yet" (a just-created ENI not yet
# visible to other APIs, an attachment in progress, a detaching ENI not yet deletable);
# and these curl exit statuses (DNS, connect, timeout, TLS handshake, reset or empty reply).
readonly RETRYABLE_ERRORS='RequestLimitExceeded|Throttling|ThrottlingException|RequestThrottled|InvalidNetworkInterfaceID\.NotFound|IncorrectState|InvalidNetworkInterface\.InUse'
readonly RETRYABLE_CURL_EXITS=(6 7 28 35 52 55 56)
declare -A credentials=()

log() { printf '%(%Y-%m-%dT%H:%M:%S%z)T multus-eni: %s\n' -1 "$*"; }
die() {
  log "ERROR: $*"
  note_failure "$*"
  exit 1
}

# The first failure of a run is the reason its fatal exit reports: a network's EC2 error comes
# before the cleanup's and main's "not ready". noclobber (O_EXCL) lets one of the parallel
# jobs win.
readonly REASON_FILE=$STATE_DIR/failure-reason
note_failure() { (set -C && printf '%s\n' "${1//[$'\n\r']/ }" >"$REASON_FILE") 2>/dev/null || true; }

run_on_host() {
  if [[ $HOST_CHANGES == 0 ]]; then
    printf '%s\n' "$*" >>"$HOST_COMMAND_LOG"
  else
    "$@"
  fi
}

imds() {
  curl -fsS --connect-timeout 2 --max-time 5 --retry 5 --retry-connrefused \
    -H "X-aws-ec2-metadata-token: $imds_token" "$IMDS_URL/latest/meta-data/$1"
}

# Prints an IMDS path that may not exist yet; early in boot IMDS answers 404 for the instance
# profile's credentials, which curl's --retry does not retry. Polls for
# MULTUS_CREDENTIALS_WAIT_SECONDS.
imds_wait() {
  local deadline=$((SECONDS + ${MULTUS_CREDENTIALS_WAIT_SECONDS:-120}))
  until imds "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    log "IMDS has no $1 yet" >&2
    sleep 1
  done
}

# Reads the instance profile's temporary credentials from IMDS into globals.
load_credentials() {
  local role document field
  role=$(imds_wait iam/security-credentials/) ||
    die "IMDS has no instance profile credentials"
  role=${role%%$'\n'*}
  document=$(imds_wait "iam/security-credentials/$role") ||
    die "IMDS has no credentials for $role"
  declare -gA credentials=()
  for field in AccessKeyId SecretAccessKey Token; do
    # The values are base64-like; anything else would not survive curl's config syntax.
    [[ $document =~ \"$field\"[[:space:]]*:[[:space:]]*\"([A-Za-z0-9/+=]+)\" ]] ||
      die "IMDS credentials for $role lack a usable $field"
    credentials[$field]=${BASH_REMATCH[1]}
  done
}

# curl configuration carrying the credentials (printf is a builtin: nothing shows in ps).
signing_config() {
  printf 'user = "%s:%s"\nheader = "x-amz-security-token: %s"\n' \
    "${credentials[AccessKeyId]}" "${credentials[SecretAccessKey]}" "${credentials[Token]}"
}

# Whether a failed EC2 call is worth another attempt: ec2_retryable <curl exit> <HTTP> <code>
ec2_retryable() {
  local curl_exit=$1 status=$2 code=$3
  if ((curl_exit != 0)); then
    [[ " ${RETRYABLE_CURL_EXITS[*]} " == *" $curl_exit "* ]]
  else
    [[ $status == 5?? || $code =~ ^($RETRYABLE_ERRORS)$ ]]
  fi
}

# Prints the text of the first <$1> element of $ec2_response; fails when there is none.
xml_value() {
  local pattern="<$1>([^<]*)</$1>"
  [[ $ec2_response =~ $pattern ]] && printf '%s' "${BASH_REMATCH[1]}"
}

# Calls the EC2 Query API: ec2_call <Action> [<Parameter>=<value> ...], leaving the XML answer
# in $ec2_response. Retryable failures are retried after a delay drawn uniformly from
# [0, min(20 s, 0.2 s * 2^attempt)); the final error goes to the log.
ec2_call() {
  local action=$1 attempt status code curl_exit ceiling_ms delay_ms delay parameter
  shift
  local form=(--data-urlencode "Action=$action" --data-urlencode "Version=$EC2_API_VERSION")
  for parameter; do
    form+=(--data-urlencode "$parameter")
  done
  for ((attempt = 1; ; attempt++)); do
    curl_exit=0
    ec2_response=$(curl -sS --connect-timeout 5 --max-time 30 --user-agent multus-eni-bootstrap \
      --config <(signing_config) --aws-sigv4 "aws:amz:$region:ec2" \
      --write-out '\n%{http_code}' "${form[@]}" "$ec2_endpoint/") || curl_exit=$?
    status=${ec2_response##*$'\n'}
    ec2_response=${ec2_response%$'\n'*}
    if ((curl_exit != 0)); then
      code="curl exit status $curl_exit"
    elif [[ $status == 2?? ]]; then
      return 0
    else
      code=$(xml_value Code) || code="HTTP $status"
    fi
    if ((attempt == EC2_MAX_ATTEMPTS)) || ! ec2_retryable "$curl_exit" "$status" "$code"; then
      code+=": $(xml_value Message || true)"
      log "$action failed after $attempt attempt(s): $code"
      # attach_network's ifname, when a network's job makes the call.
      note_failure "${ifname:+$ifname: }$action: $code"
      return 1
    fi
    ceiling_ms=$((200 << attempt < 20000 ? 200 << attempt : 20000))
    delay_ms=$((RANDOM * ceiling_ms / 32768))
    printf -v delay '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000))
    log "$action: $code; retrying in $delay s"
    sleep "$delay"
  done
}

# Loaded before the kernel sees the device: its name and its network's MTU (nodeadm's networkd
# file would have set the VPC's 9001, too large for a path through a transit gateway or a VPN)
# (.link), networkd's hands off (.network), a udev rule that brings the link up whenever it
# appears, at this attach and every boot (an unmanaged link stays down otherwise), and nodeadm's
# record that the interface is not networkd's.
write_interface_files() {
  local ifname=$1 mac=$2 mtu=$3
  printf '[Match]\nMACAddress=%s\n\n[Link]\nName=%s\nMTUBytes=%s\n' "$mac" "$ifname" "$mtu" \
    >"$LINK_DIR/10-multus-$ifname.link" || return
  printf '[Match]\nPermanentMACAddress=%s\n\n[Link]\nUnmanaged=yes\n' "$mac" \
    >"$LINK_DIR/10-multus-$ifname.network" || return
  # The rule names the .link's Name= itself, not udev's $name: udev formats RUN when it reads
  # the rule (systemd udev-rules.c, TK_A_RUN_PROGRAM), before 80-net-setup-link.rules applies
  # the .link, so $name would be the kernel's name, gone once RUN runs after the rename.
  printf 'ACTION=="add", SUBSYSTEM=="net", ATTR{address}=="%s", RUN+="/usr/sbin/ip link set dev %s up"\n' \
    "$mac" "$ifname" >"$RULES_DIR/10-multus-$ifname.rules" || return
  # Any manager other than networkd's "io.systemd.Network"; nodeadm writes the bare name.
  mkdir -p "$NODEADM_NET_MANAGER_DIR/$instance_id" &&
    printf 'cni' >"$NODEADM_NET_MANAGER_DIR/$instance_id/$ifname" || return
  run_on_host udevadm control --reload && run_on_host networkctl reload
}

# Sets the attachment attributes: DeleteOnTermination and, unless the network keeps EC2's
# default (source_dest_check true), no source/dest check. The calls run concurrently.
configure_attachment() {
  local eni=$1 attachment=$2 source_dest_check=$3 delete_on_termination failed=0
  ec2_call ModifyNetworkInterfaceAttribute "NetworkInterfaceId=$eni" \
    "Attachment.AttachmentId=$attachment" Attachment.DeleteOnTermination=true &
  delete_on_termination=$!
  if [[ $source_dest_check == false ]]; then
    ec2_call ModifyNetworkInterfaceAttribute "NetworkInterfaceId=$eni" \
      SourceDestCheck.Value=false || failed=1
  fi
  wait "$delete_on_termination" || failed=1
  return "$failed"
}

# Deletes an ENI this run is giving up on. EC2 deletes only detached ENIs and detaching is
# asynchronous, which the InvalidNetworkInterface.InUse settling retry absorbs.
release_eni() {
  local ifname=$1 eni=$2 attachment=$3
  log "$ifname: deleting $eni"
  if [[ -n $attachment ]]; then
    ec2_call DetachNetworkInterface "AttachmentId=$attachment" || true
  fi
  if ec2_call DeleteNetworkInterface "NetworkInterfaceId=$eni"; then
    rm -f "$LINK_DIR/10-multus-$ifname".{link,network} "$RULES_DIR/10-multus-$ifname.rules" \
      "$NODEADM_NET_MANAGER_DIR/$instance_id/$ifname"
  else
    log "$ifname: could not delete $eni; delete it by hand (tag $INSTANCE_TAG_KEY=$instance_id)"
  fi
}

# Deletes every unattached ENI tagged with this instance, including one whose
# CreateNetworkInterface answer never arrived. Attached ones carry DeleteOnTermination (else
# attach_network released them) and go with the instance.
release_orphans() {
  local enis eni pattern='<networkInterfaceId>([^<]*)</networkInterfaceId>'
  ec2_call DescribeNetworkInterfaces "Filter.1.Name=tag:$INSTANCE_TAG_KEY" \
    "Filter.1.Value.1=$instance_id" Filter.2.Name=status Filter.2.Value.1=available || return
  enis=$ec2_response
  while [[ $enis =~ $pattern ]]; do
    enis=${enis#*"${BASH_REMATCH[0]}"}
    eni=${BASH_REMATCH[1]}
    ec2_call DeleteNetworkInterface "NetworkInterfaceId=$eni"
  done
}

write_console() { printf '%s\n' "$1" >/dev/console; }

# EXIT trap of the main shell (background jobs and command substitutions do not run it).
# The reason goes where an operator finds it once the node is off: the console (EC2's console
# output) and, best effort, a tag on this instance, whose value keeps to what every AWS service
# accepts (EC2 takes any character): at most 256 letters, digits, spaces and _ . : / = + - @;
# ASCII only, so that cutting at 256 bytes cuts no character.
on_fatal_exit() {
  # Both $? are the exit status (local expands all its words first). A command that failed
  # under set -e records nothing, and BASH_COMMAND would name the renderer's eval.
  local status=$? reason="exit $?, see $LOG_FILE"
  ((status != 0)) || return 0
  [[ ! -s $REASON_FILE ]] || reason=$(<"$REASON_FILE")
  run_on_host write_console "multus-eni-bootstrap-failure: $reason" || true
  reason=${reason//[^A-Za-z0-9 _.:\/=+@-]/ }
  [[ -z ${credentials[Token]:-} ]] || ec2_call CreateTags "ResourceId.1=$instance_id" \
    "Tag.1.Key=$FAILURE_TAG_KEY" "Tag.1.Value=${reason:0:256}" || true
  # Credentials are loaded last, after the instance ID and the EC2 endpoint.
  [[ -z ${credentials[Token]:-} ]] || release_orphans || true
  # Karpenter replaces a node whose instance stops (interruption queue).
  log "powering off (exit $status)"
  run_on_host systemctl --no-block poweroff || true
  exit "$status"
}

wait_for_interface() {
  local ifname=$1 mac=$2 device_index=$3 deadline=$((SECONDS + WAIT_SECONDS)) address
  while ((SECONDS < deadline)); do
    if [[ $HOST_CHANGES != 0 ]]; then
      [[ -e /sys/class/net/$ifname/address && $(</sys/class/net/"$ifname"/address) == "$mac" ]] &&
        return 0
    elif [[ $(imds "network/interfaces/macs/$mac/device-number" 2>/dev/null) == "$device_index" ]]; then
      return 0
    fi
    sleep 0.2
  done
  for address in /sys/class/net/*/address; do
    [[ -e $address && $(<"$address") == "$mac" ]] &&
      die "$ifname: MAC $mac appeared as ${address%/address} instead; is the .link file applied?"
  done
  die "$ifname: no interface with MAC $mac appeared within ${WAIT_SECONDS}s"
}

# node_prefix networks: node_prefix.sh, included by the renderer only when one is configured,
# overrides these no-ops (they see attach_network's locals: create, mac).
node_prefix_load() { :; }
node_prefix_create_args() { :; }
node_prefix_created() { :; }
node_prefix_attached() { :; }
node_prefix_up() { :; }
# host-device networks: host_device.sh overrides these (they see attach_network's mac).
host_device_load() { :; }
host_device_up() { :; }

# Adds the interface's connection tracking timeouts, if its network sets any, to `create`.
connection_tracking_create_args() {
  local ifname setting settings
  while read -r ifname settings; do
    [[ $ifname == "$1" ]] || continue
    for setting in $settings; do
      create+=("ConnectionTrackingSpecification.$setting")
    done
  done <<<"$CONNECTION_TRACKING"
}

# Makes sure one network's ENI is attached, configured and up. Runs as a background job.
attach_network() {
  local network=$1 ifname=$2 device_index=$3 source_dest_check=$4 subnet=$5 groups=$6 mtu=$7
  local state_file=$STATE_DIR/$ifname.eni
  local eni mac attachment="" attached_subnet

  if [[ -n ${attached_by_index[$device_index]:-} ]]; then
    read -r mac attached_subnet eni <<<"${attached_by_index[$device_index]}"
    [[ $attached_subnet == "$subnet" ]] ||
      die "$ifname: device index $device_index holds $eni from $attached_subnet, not from $subnet"
    if [[ -f $state_file && $(<"$state_file") == "$instance_id $eni" ]]; then
      log "$ifname: $eni already attached at device index $device_index"
    else
      log "$ifname: $eni attached by an interrupted run; configuring its attachment"
      ec2_call DescribeNetworkInterfaces "NetworkInterfaceId.1=$eni" || return 1
      attachment=$(xml_value attachmentId) || die "$ifname: EC2 reports no attachment for $eni"
    fi
    node_prefix_attached "$ifname" || die "$ifname: $eni does not hold the expected prefixes"
  else
    local create=("SubnetId=$subnet" "Description=Multus $network of $instance_id"
      "ClientToken=$instance_id-$device_index-$run_id"
      TagSpecification.1.ResourceType=network-interface) i tag security_groups
    IFS=, read -ra security_groups <<<"$groups"
    for i in "${!security_groups[@]}"; do
      create+=("SecurityGroupId.$((i + 1))=${security_groups[i]}")
    done
    i=0
    for tag in "$CLUSTER_TAG_KEY=$MULTUS_CLUSTER_NAME" "$OWNER_TAG_KEY=$MULTUS_CLUSTER_NAME" \
      "$NETWORK_TAG_KEY=$network" "$INSTANCE_TAG_KEY=$instance_id" "$NO_MANAGE_TAG_KEY=true"; do
      i=$((i + 1))
      create+=("TagSpecification.1.Tag.$i.Key=${tag%%=*}" "TagSpecification.1.Tag.$i.Value=${tag#*=}")
    done
    connection_tracking_create_args "$ifname"
    node_prefix_create_args "$ifname"
    ec2_call CreateNetworkInterface "${create[@]}" || return 1
    if ! eni=$(xml_value networkInterfaceId) || ! mac=$(xml_value macAddress); then
      die "$ifname: CreateNetworkInterface answered without an ENI ID and MAC"
    fi
    log "$ifname: created $eni ($mac) in $subnet"
    if ! node_prefix_created "$ifname"; then
      release_eni "$ifname" "$eni" ""
      return 1
    fi
    # Name and networkd config must be in place before the kernel sees the device.
    if ! write_interface_files "$ifname" "$mac" "$mtu" ||
      ! ec2_call AttachNetworkInterface "NetworkInterfaceId=$eni" "InstanceId=$instance_id" \
        "DeviceIndex=$device_index" ||
      ! attachment=$(xml_value attachmentId); then
      release_eni "$ifname" "$eni" ""
      return 1
    fi
    log "$ifname: attached $eni at device index $device_index ($attachment)"
  fi

  if [[ -n $attachment ]]; then
    if ! configure_attachment "$eni" "$attachment" "$source_dest_check"; then
      release_eni "$ifname" "$eni" "$attachment"
      return 1
    fi
    printf '%s %s\n' "$instance_id" "$eni" >"$state_file"
  fi

  wait_for_interface "$ifname" "$mac" "$device_index"
  run_on_host sysctl -qw "net.ipv4.conf.$ifname.rp_filter=0"
  run_on_host ip link set dev "$ifname" up
  node_prefix_up "$ifname"
  host_device_up "$ifname"
  log "$ifname: up"
}

main() {
  trap on_fatal_exit EXIT
  mkdir -p "$STATE_DIR" "${LOG_FILE%/*}" "$LINK_DIR" "${SYSCTL_FILE%/*}" "$RULES_DIR"
  rm -f "$REASON_FILE"
  exec > >(tee -a "$LOG_FILE") 2>&1
  : "${MULTUS_CLUSTER_NAME:?missing configuration block}"
  : "${MULTUS_NETWORKS:?missing}" "${MULTUS_PLACEMENTS:?missing}"

  imds_token=$(curl -fsS --connect-timeout 2 --max-time 5 --retry 5 --retry-connrefused \
    -X PUT -H "X-aws-ec2-metadata-token-ttl-seconds: 600" "$IMDS_URL/latest/api/token") ||
    die "no IMDSv2 token from $IMDS_URL"
  instance_id=$(imds instance-id)
  region=$(imds placement/region)
  local az
  az=$(imds placement/availability-zone)
  log "instance $instance_id in $az"
  rm -f "$READY_MARKER"

  local placement_az subnet_list configured_azs=() subnets=()
  while read -r placement_az subnet_list; do
    configured_azs+=("$placement_az")
    if [[ $placement_az == "$az" ]]; then
      IFS=, read -ra subnets <<<"$subnet_list"
    fi
  done <<<"$MULTUS_PLACEMENTS"
  ((${#subnets[@]} > 0)) ||
    die "availability zone $az is not in the Multus placement table (${configured_azs[*]})"
  node_prefix_load "$az"
  host_device_load "$az"

  ec2_endpoint=$EC2_ENDPOINT
  [[ -n $ec2_endpoint ]] || ec2_endpoint=https://ec2.$region.$(imds services/domain) ||
    die "IMDS has no services/domain to build the EC2 endpoint from"
  load_credentials

  local networks=() ifnames=() device_indexes=() source_dest_checks=() network_groups=()
  local mtus=() network ifname device_index source_dest_check mtu groups
  while read -r network ifname device_index source_dest_check mtu groups; do
    networks+=("$network") ifnames+=("$ifname") device_indexes+=("$device_index")
    source_dest_checks+=("$source_dest_check") network_groups+=("$groups") mtus+=("$mtu")
  done <<<"$MULTUS_NETWORKS"

  # Only device numbers are fetched for every ENI; subnet and ENI id only for ours.
  declare -gA attached_by_index=()
  local mac number
  for mac in $(imds network/interfaces/macs/); do
    mac=${mac%/}
    number=$(imds "network/interfaces/macs/$mac/device-number")
    if [[ " ${device_indexes[*]} " == *" $number "* ]]; then
      attached_by_index[$number]="$mac $(imds "network/interfaces/macs/$mac/subnet-id") $(imds "network/interfaces/macs/$mac/interface-id")"
    fi
  done

  # Kernel uses max(all, interface) for rp_filter; Multus traffic is asymmetric by design.
  printf 'net.ipv4.conf.all.rp_filter = 0\n' >"$SYSCTL_FILE"
  printf 'net.ipv4.conf.%s.rp_filter = 0\n' "${ifnames[@]}" >>"$SYSCTL_FILE"
  run_on_host sysctl -qw net.ipv4.conf.all.rp_filter=0

  run_id=$EPOCHSECONDS-$$
  local i pids=() failed=()
  for i in "${!networks[@]}"; do
    attach_network "${networks[i]}" "${ifnames[i]}" "${device_indexes[i]}" \
      "${source_dest_checks[i]}" "${subnets[i]}" "${network_groups[i]}" "${mtus[i]}" &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[i]}" || failed+=("${ifnames[i]}")
  done
  ((${#failed[@]} == 0)) || die "not ready: ${failed[*]} failed (${#failed[@]} of ${#pids[@]})"

  printf '%s\n' "${ifnames[@]}" >"$READY_MARKER"
  log "all ${#ifnames[@]} Multus interfaces attached and up; wrote $READY_MARKER"
}

main "$@"
