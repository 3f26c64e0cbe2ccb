"""Multus pod IP agent: makes every Multus pod address a secondary IP of its node's Multus ENI.

Runs once per node (DaemonSet, host network, so IMDS answers with hop limit 1 and EC2 calls
carry the node role). The CNI plugin `multus-pod-ip`, chained after ipvlan and sbr in every
NetworkAttachmentDefinition, asks over a unix socket:

  ADD    assign the pod's address to the ENI of the NAD's master interface, and wait until
         IMDS lists it on that ENI (a move from another ENI completes asynchronously);
  DEL    unassign it;
  CHECK  is it still assigned?

Requests for one ENI are served by one worker thread: whatever queued up while the previous
EC2 call was in flight goes out as one AssignPrivateIpAddresses (and one Unassign) call.
Throttling and 5xx answers are retried with exponential backoff and full jitter until the
request's deadline, and once EC2 throttled the node every attempt also waits for an adaptive
client-side rate limit (as the AWS SDKs' adaptive retry mode). A periodic, jittered reconcile
compares each ENI's secondary addresses inside the managed ranges with the pods recorded on the
node whose network namespace still exists: addresses of pods that are gone are unassigned,
missing ones assigned (without taking them from another ENI). The ENI's addresses come from EC2
once, then from the agent's own record checked against IMDS local-ipv4s: at rest the agent
makes no EC2 call. Records live in /run, so a reboot starts from "no pods" and the first
reconcile releases whatever the node held before. Prometheus metrics are served on the node.

Python 3.9 standard library only: the same package runs in the agent image (Amazon Linux 2023,
shipped in a ConfigMap) and in tests. `python3 -m multus_pod_ips.agent CONFIG.json` runs it
(configuration: a JSON file; environment overrides for tests: MULTUS_IMDS_URL,
MULTUS_EC2_ENDPOINT). Modules: config (the configuration file), imds (IMDSv2 client), ec2_query
(the EC2 Query API client), rate_limit (its client-side rate limit), records (pod records),
eni_worker (one thread per ENI), node_agent (the CNI requests and the reconcile), socket_server
(the plugin's unix socket), metrics (the Prometheus endpoint), service (start, serve, stop).
The CNI error codes are the plugin's (multus_pod_ips/cni_plugin.py), which relays them.
"""
