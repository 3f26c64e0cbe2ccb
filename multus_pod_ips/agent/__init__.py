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
request's deadline. A periodic reconcile compares each ENI's secondary addresses inside the
managed ranges with the pods recorded on the node whose network namespace still exists:
addresses of pods that are gone are unassigned, missing ones assigned (without taking them
from another ENI). Records live in /run, so a reboot starts from "no pods" and the first
reconcile releases whatever the node held before.

Python 3.9 standard library only: the same package runs in the agent image (Amazon Linux 2023,
shipped in a ConfigMap) and in tests. `python3 -m multus_pod_ips.agent CONFIG.json` runs it
(configuration: a JSON file; environment overrides for tests: MULTUS_IMDS_URL,
MULTUS_EC2_ENDPOINT). Modules: config (the configuration file), imds (IMDSv2 client), ec2_query
(the EC2 Query API client), records (pod records), eni_worker (one thread per ENI), node_agent
(the CNI requests and the reconcile), socket_server (the plugin's unix socket), service (start,
serve, stop). The CNI error codes are the plugin's (multus_pod_ips/cni_plugin.py), which relays
them.
"""
