"""cloud-init's NoCloud seed: a small ISO 9660 disk labelled `cidata` holding meta-data (the
instance ID, which decides whether cloud-init treats a boot as a new instance) and the user-data
a test gives, which cloud-init runs as it runs EC2's.

cloud-init finds the seed by the label on a vfat or iso9660 file system only; genisoimage
(Debian package genisoimage) writes one from two files, with no loop device and no root.
"""

from __future__ import annotations

import shutil
import subprocess
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

from testing_support.node_box.errors import Unavailable


def shell_script_user_data(*scripts: str) -> str:
    """User-data in the MIME multipart form Karpenter and node_bootstrap/renderer.py use, one
    text/x-shellscript part per script (cloud-init runs them in order, once per instance)."""
    message = MIMEMultipart()
    for script in scripts:
        message.attach(MIMEText(script, "x-shellscript"))
    return message.as_string()


def write_seed(directory: Path, *, instance_id: str, hostname: str, user_data: str) -> Path:
    """Writes meta-data and user-data into `directory` and returns the seed ISO made of them."""
    genisoimage = shutil.which("genisoimage")
    if genisoimage is None:
        raise Unavailable("genisoimage is not installed (Debian package genisoimage)")
    directory.mkdir(parents=True, exist_ok=True)
    meta_data = directory / "meta-data"
    meta_data.write_text(f"instance-id: {instance_id}\nlocal-hostname: {hostname}\n")
    user_data_file = directory / "user-data"
    user_data_file.write_text(user_data)
    iso = directory / "seed.iso"
    # -joliet and -rock keep the names as they are (cloud-init reads "meta-data", "user-data")
    options = ["-quiet", "-volid", "cidata", "-joliet", "-rock", "-output", str(iso)]
    completed = subprocess.run(
        [genisoimage, *options, str(user_data_file), str(meta_data)],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"genisoimage failed: {completed.stderr}")
    return iso
