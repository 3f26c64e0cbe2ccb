"""public.ecr.aws/karpenter on loopback: the Karpenter charts in a real OCI registry.

The registry is CNCF Distribution's cmd/registry (github.com/distribution/distribution/v3 at
the version go/registry/go.mod pins), built once into the cluster box's cache
(testing_support/go_build.py), serving TLS on 127.0.0.1 with a certificate for public.ecr.aws
that the box's own CA signed. The handler's helm reaches it under its real name: HTTPS_PROXY
names a CONNECT proxy on 127.0.0.1 (`ConnectProxy`) that tunnels public.ecr.aws:443, and only
that, to the registry; SSL_CERT_FILE makes the box's CA the only one helm trusts. Nothing of
the handler's commands changes: `helm registry login public.ecr.aws` and `helm pull
oci://public.ecr.aws/karpenter/<chart> --version <v>` run as in Lambda.

The charts pushed are what Karpenter's release pushes (hack/release/common.sh of the provider
at the pinned tag: `build` names the release's controller image in values.yaml (here by tag
only: `_name_the_release_image`), `publishHelmChart` sets the chart's version and appVersion to
the release, `helm package`, `helm push ... oci://public.ecr.aws/karpenter/`), made from the
provider's Go module (charts/karpenter-crd, charts/karpenter): the module zip drops symlinks, so
charts/karpenter/crds/ (in the repository one symlink per file of pkg/apis/crds/) is laid
again from pkg/apis/crds/ before packaging.
"""

from __future__ import annotations

import datetime
import os
import select
import shutil
import socket
import socketserver
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from testing_support.cluster_box.build import BuildError, cache_root
from testing_support.go_build import GoBuild, built
from testing_support.startup import wait_until_answering

GO_MODULE = Path(__file__).parent / "go" / "registry"
REGISTRY_PACKAGE = "github.com/distribution/distribution/v3/cmd/registry"
#: The registry and repository prefix of the app's HelmCharts (cdk_constructs/karpenter_controller).
REGISTRY_HOST = "public.ecr.aws"
REPOSITORY = f"oci://{REGISTRY_HOST}/karpenter"
READY_SECONDS = 30.0


def build_registry() -> Path:
    go = shutil.which("go")
    if go is None:
        raise BuildError("the deploy box needs Go (go on PATH) to build the OCI registry")
    build = GoBuild(
        name="distribution-registry",
        directory=GO_MODULE,
        packages=((REGISTRY_PACKAGE, "registry"),),
        error=BuildError,
        environment={"CGO_ENABLED": "0"},
        settings=("CGO_ENABLED=0",),
    )
    return built(build, go, cache_root())["registry"]


@dataclass(frozen=True)
class Tls:
    """The registry's CA and serving certificate and key (PEM files)."""

    ca_cert: Path
    cert: Path
    key: Path


def make_tls(directory: Path, host: str = REGISTRY_HOST) -> Tls:
    """A CA of its own and a serving certificate for `host` that it signs."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> Any:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "deploy-box-registry-ca")])
    ca = (
        builder(ca_name, ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]), ca_name, key)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    tls = Tls(directory / "ca.crt", directory / "registry.crt", directory / "registry.key")
    tls.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    tls.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    tls.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return tls


class _Tunnel(socketserver.StreamRequestHandler):
    """One CONNECT: to the registry if it names public.ecr.aws:443, else 403."""

    server: _ProxyServer

    def handle(self) -> None:
        request = self.rfile.readline(65536).decode("latin-1").split()
        while self.rfile.readline(65536) not in (b"\r\n", b"\n", b""):
            pass
        if len(request) < 2 or request[0] != "CONNECT" or request[1] != f"{REGISTRY_HOST}:443":
            self.server.refused.append(" ".join(request[:2]))
            self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        with socket.create_connection(("127.0.0.1", self.server.target_port)) as upstream:
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            _pump(self.connection, upstream)


def _pump(a: socket.socket, b: socket.socket) -> None:
    sockets = [a, b]
    while True:
        readable, _, _ = select.select(sockets, [], [], 60)
        if not readable:
            return
        for source in readable:
            data = source.recv(65536)
            if not data:
                return
            (b if source is a else a).sendall(data)


class _ProxyServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, target_port: int) -> None:
        super().__init__(("127.0.0.1", 0), _Tunnel)
        self.target_port = target_port
        self.refused: list[str] = []


@dataclass
class Registry:
    """A running registry and its proxy: `environment()` is what a process needs to reach
    public.ecr.aws there."""

    tls: Tls
    port: int
    proxy: _ProxyServer

    def environment(self) -> dict[str, str]:
        proxy = f"http://127.0.0.1:{self.proxy.server_address[1]}"
        return {
            "HTTPS_PROXY": proxy,
            "https_proxy": proxy,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "SSL_CERT_FILE": str(self.tls.ca_cert),
        }

    @property
    def refused(self) -> list[str]:
        """CONNECTs to anything but public.ecr.aws:443 (a handler reaching elsewhere)."""
        return list(self.proxy.refused)


@contextmanager
def running_registry(directory: Path) -> Iterator[Registry]:
    binary = build_registry()
    tls = make_tls(directory / "tls")
    port = _free_port()
    config = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(directory / "storage")}},
        "http": {
            "addr": f"127.0.0.1:{port}",
            "secret": "deploy-box",
            "tls": {"certificate": str(tls.cert), "key": str(tls.key)},
        },
    }
    config_file = directory / "config.yml"
    config_file.write_text(yaml.safe_dump(config))
    log = (directory / "registry.log").open("wb")
    process = subprocess.Popen(
        [str(binary), "serve", str(config_file)], stdout=log, stderr=subprocess.STDOUT
    )
    proxy = _ProxyServer(port)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        context = ssl.create_default_context(cafile=str(tls.ca_cert))
        context.check_hostname = False
        wait_until_answering(
            f"https://127.0.0.1:{port}/v2/",
            timeout_seconds=READY_SECONDS,
            exit_reason=lambda: (
                None
                if process.poll() is None
                else f"registry exited: {(directory / 'registry.log').read_text()[-2000:]}"
            ),
            context=context,
        )
        yield Registry(tls, port, proxy)
    finally:
        proxy.shutdown()
        proxy.server_close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def push_release_charts(
    registry: Registry, helm: Path, module_directory: Path, version: str, work: Path
) -> dict[str, Path]:
    """karpenter-crd and karpenter of the provider module at `version`, packaged and pushed as
    Karpenter's release does (module docstring); returns each chart's packaged .tgz."""
    environment = {**_base_environment(work), **registry.environment()}
    packaged = {}
    for chart in ("karpenter-crd", "karpenter"):
        staged = work / "charts" / chart
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(module_directory / "charts" / chart, staged)
        for path in staged.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        staged.chmod(0o755)
        if chart == "karpenter":
            _name_the_release_image(staged / "values.yaml", version)
            crds = staged / "crds"
            crds.mkdir(exist_ok=True)
            for crd in sorted((module_directory / "pkg" / "apis" / "crds").glob("*.yaml")):
                shutil.copyfile(crd, crds / crd.name)
        chart_yaml = staged / "Chart.yaml"
        metadata = yaml.safe_load(chart_yaml.read_text())
        metadata["version"] = metadata["appVersion"] = version
        chart_yaml.write_text(yaml.safe_dump(metadata, sort_keys=False))
        _run([str(helm), "package", str(staged), "--version", version], work, environment)
        artifact = work / f"{chart}-{version}.tgz"
        _run([str(helm), "push", str(artifact), REPOSITORY], work, environment)
        packaged[chart] = artifact
    return packaged


def _name_the_release_image(values_file: Path, version: str) -> None:
    """The controller image the release names in the chart (hack/release/common.sh, `build`: its
    `yq` sets controller.image's tag to the release and digest to the image ko pushed; the
    module's values.yaml still names the previous release's). The digest of the release's image
    is not knowable here, so the box's chart names the image by its tag: a chart-level
    deviation no pod sees, as the box pulls no image."""
    values = yaml.safe_load(values_file.read_text())
    values["controller"]["image"].update({"tag": version, "digest": ""})
    values_file.write_text(yaml.safe_dump(values, sort_keys=False))


def _base_environment(work: Path) -> dict[str, str]:
    """helm's own state (registry logins, caches) under `work`, not the user's home."""
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}


def _run(command: list[str], cwd: Path, environment: Mapping[str, str]) -> str:
    completed = subprocess.run(
        command, cwd=cwd, env=dict(environment), capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise BuildError(f"{' '.join(command)}: {completed.stderr.strip()}")
    return completed.stdout


def pulled(helm: Path, registry: Registry, chart: str, version: str) -> Path:
    """The chart as `helm pull` gets it from the registry (for a test's own rendering)."""
    work = Path(tempfile.mkdtemp(prefix="pulled-"))
    environment = {**_base_environment(work), **registry.environment()}
    _run(
        [str(helm), "pull", f"{REPOSITORY}/{chart}", "--version", version, "--untar"],
        work,
        environment,
    )
    return work / chart
