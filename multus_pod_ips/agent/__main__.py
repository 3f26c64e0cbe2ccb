"""`python3 -m multus_pod_ips.agent CONFIG.json`: the DaemonSet's command."""

import sys

from .service import main

sys.exit(main(sys.argv))
