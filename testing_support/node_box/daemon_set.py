"""A DaemonSet's pod on a node box, run by systemd in place of kubelet and a container runtime.

`pod_files(daemon_set, config_maps)` turns the pod template of a synthesized DaemonSet (the
product's chart, as it goes to the cluster) into the files that run it on the box's systemd:
each init container a oneshot unit, run in order once per boot; each container a service that
starts after them and again when it exits (restartPolicy Always); each unit wanted by
multi-user.target, so a reboot starts the pod again as the node's kubelet recreates a
DaemonSet's pod. Volumes: a hostPath volume is bind-mounted at its mountPath (read-only when
the mount is; DirectoryOrCreate paths and the mount points are created by a oneshot unit
before the pod's others, at each boot, as kubelet creates them at each start of the pod); a
configMap volume is written as files (its items' paths, its defaultMode) and bind-mounted
read-only. The container's command, args, workingDir and literal env are kept.

What it does not model (a fake is a debt):
- the container image: the box's own /usr/bin/python3 (Debian 12's 3.11) and programs run the
  command, not the image's;
- securityContext, capabilities, users: every unit runs as root with the host's capabilities;
- resources and limits, probes (nobody reads readiness), terminationGracePeriodSeconds;
- the Kubernetes API: no pod object or status, no scheduling (node selectors, tolerations: the
  test chooses the node), no rollout, no start order against the node's registration and the
  startup taint; env from fieldRef, secrets or config maps is refused, not modelled;
- the container's own root: the mount points are made in the box's (/host/opt/cni/bin is a
  directory of the box);
- mount propagation: systemd's own for a unit's namespace (host mounts such as /run/netns
  entries propagate in, as HostToContainer), whatever the manifest says.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Where the configMap volumes' files of each pod live on the box.
POD_ROOT = "/var/lib/node-box/pods"
UNIT_DIR = "/etc/systemd/system"


@dataclass(frozen=True)
class BoxFile:
    """A file to write on the box (NodeBox.write_file)."""

    path: str
    text: str
    mode: str = "0644"


@dataclass(frozen=True)
class PodFiles:
    """What to write on the box, and the units to enable and start, in order."""

    files: list[BoxFile]
    units: list[str]

    def install_script(self) -> str:
        """Run after the files are written: enable the units (started at each boot) and start
        them now, in order."""
        units = " ".join(self.units)
        return f"systemctl daemon-reload && systemctl enable {units} && systemctl start {units}"


def pod_files(daemon_set: Mapping[str, Any], config_maps: Sequence[Mapping[str, Any]]) -> PodFiles:
    """The files that run `daemon_set`'s pod on the box; `config_maps` its configMap volumes'
    sources (by metadata.name)."""
    pod_name = daemon_set["metadata"]["name"]
    spec = daemon_set["spec"]["template"]["spec"]
    maps = {config_map["metadata"]["name"]: config_map for config_map in config_maps}
    files: list[BoxFile] = []
    sources: dict[str, str] = {}  # volume name -> path on the box
    read_only: set[str] = set()  # volumes kubelet mounts read-only whatever the mount says
    created: list[str] = []  # DirectoryOrCreate host paths
    for volume in spec.get("volumes", []):
        if "hostPath" in volume:
            host_path = volume["hostPath"]
            sources[volume["name"]] = host_path["path"]
            if host_path.get("type") == "DirectoryOrCreate":
                created.append(host_path["path"])
        elif "configMap" in volume:
            directory = f"{POD_ROOT}/{pod_name}/{volume['name']}"
            sources[volume["name"]] = directory
            read_only.add(volume["name"])
            files += _config_map_files(volume["configMap"], maps, directory)
        else:
            raise ValueError(f"{pod_name}: volume {volume['name']} is of a kind not modelled")
    volumes = _Volumes(sources, read_only)
    containers = [*spec.get("initContainers", []), *spec["containers"]]
    # systemd's bind mounts need their source and their mount point to exist (a container
    # runtime makes the mount points in the container's root; here the root is the box's)
    mount_points = [mount["mountPath"] for c in containers for mount in c.get("volumeMounts", [])]
    prepare = f"{pod_name}-volumes.service"
    files.append(BoxFile(f"{UNIT_DIR}/{prepare}", _volumes_unit(pod_name, created, mount_points)))
    units = [prepare]
    for container in spec.get("initContainers", []):
        unit = f"{pod_name}-init-{container['name']}.service"
        text = _unit(pod_name, container, volumes, units[-1:], oneshot=True)
        files.append(BoxFile(f"{UNIT_DIR}/{unit}", text))
        units.append(unit)
    before_containers = units[:]
    for container in spec["containers"]:
        unit = f"{pod_name}-{container['name']}.service"
        text = _unit(pod_name, container, volumes, before_containers, oneshot=False)
        files.append(BoxFile(f"{UNIT_DIR}/{unit}", text))
        units.append(unit)
    return PodFiles(files, units)


@dataclass(frozen=True)
class _Volumes:
    sources: Mapping[str, str]  # volume name -> path on the box
    read_only: set[str]


def _volumes_unit(pod_name: str, created: Sequence[str], mount_points: Sequence[str]) -> str:
    """Creates the DirectoryOrCreate host paths (at each start of the pod, as kubelet does: a
    path under /run is gone after a reboot) and the mount points."""
    paths = " ".join(dict.fromkeys([*created, *mount_points]))
    return "\n".join(
        [
            "[Unit]",
            f"Description={pod_name} pod: its volumes (node box stand-in for kubelet)",
            "",
            "[Service]",
            "Type=oneshot",
            "RemainAfterExit=yes",
            f"ExecStart=/bin/mkdir -p {paths}",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
            "",
        ]
    )


def _config_map_files(
    volume: Mapping[str, Any], maps: Mapping[str, Mapping[str, Any]], directory: str
) -> list[BoxFile]:
    data = maps[volume["name"]]["data"]
    mode = format(volume.get("defaultMode", 0o644), "04o")
    items = volume.get("items") or [{"key": key, "path": key} for key in data]
    return [BoxFile(f"{directory}/{item['path']}", data[item["key"]], mode) for item in items]


def _unit(
    pod_name: str,
    container: Mapping[str, Any],
    volumes: _Volumes,
    after: Sequence[str],
    *,
    oneshot: bool,
) -> str:
    lines = [
        "[Unit]",
        f"Description={pod_name} pod: {'init container' if oneshot else 'container'} "
        f"{container['name']} (node box stand-in for kubelet)",
    ]
    lines += [f"Requires={unit}\nAfter={unit}" for unit in after]
    lines += ["", "[Service]"]
    lines += ["Type=oneshot", "RemainAfterExit=yes"] if oneshot else ["Restart=always"]
    if not oneshot:
        lines.append("RestartSec=2")
    for mount in container.get("volumeMounts", []):
        name = mount["name"]
        read_only = mount.get("readOnly") or name in volumes.read_only
        option = "BindReadOnlyPaths" if read_only else "BindPaths"
        lines.append(f"{option}={volumes.sources[name]}:{mount['mountPath']}")
    if "workingDir" in container:
        lines.append(f"WorkingDirectory={container['workingDir']}")
    for variable in container.get("env", []):
        if "value" not in variable:
            raise ValueError(f"{pod_name}: env {variable['name']} is not a literal value")
        setting = shlex.quote(f"{variable['name']}={variable['value']}").replace("%", "%%")
        lines.append(f"Environment={setting}")
    argv = [*container.get("command", []), *container.get("args", [])]
    lines.append(f"ExecStart={_quoted(argv)}")
    lines += ["", "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


def _quoted(words: Sequence[str]) -> str:
    """Words for an Exec line: systemd splits them as a shell would (shlex's quoting suits it)
    and expands % and $ itself, so those are doubled."""
    return " ".join(shlex.quote(word).replace("%", "%%").replace("$", "$$") for word in words)
