"""testing_support/node_box/daemon_set.py: a DaemonSet's pod template as systemd units and files.

What kubelet does that the units must keep (kubernetes.io/docs: init containers run in order,
each to completion, before the app containers; configMap volumes are mounted read-only; a
DirectoryOrCreate hostPath is created when missing) is checked on the rendered text; the units
run on a real systemd in tests/node_box."""

from __future__ import annotations

from typing import Any

import pytest

from testing_support.node_box.daemon_set import POD_ROOT, UNIT_DIR, pod_files


def daemon_set(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "agent-pod"}, "spec": {"template": {"spec": spec}}}


CONFIG_MAP = {"metadata": {"name": "code"}, "data": {"a.py": "print(1)\n", "b.json": "{}"}}


def unit(files: Any, name: str) -> list[str]:
    (text,) = [file.text for file in files.files if file.path == f"{UNIT_DIR}/{name}"]
    return str(text).splitlines()


def test_init_containers_run_in_order_before_the_containers() -> None:
    pod = pod_files(
        daemon_set(
            initContainers=[
                {"name": "first", "command": ["/bin/true"]},
                {"name": "second", "command": ["/bin/true"]},
            ],
            containers=[{"name": "main", "command": ["sleep", "infinity"]}],
        ),
        [],
    )
    assert pod.units == [
        "agent-pod-volumes.service",
        "agent-pod-init-first.service",
        "agent-pod-init-second.service",
        "agent-pod-main.service",
    ]
    first = unit(pod, "agent-pod-init-first.service")
    assert "Type=oneshot" in first and "After=agent-pod-volumes.service" in first
    assert "After=agent-pod-init-first.service" in unit(pod, "agent-pod-init-second.service")
    main = unit(pod, "agent-pod-main.service")
    for init in pod.units[:3]:
        assert f"Requires={init}" in main and f"After={init}" in main
    assert "Restart=always" in main and "WantedBy=multi-user.target" in main
    assert pod.install_script().endswith(f"systemctl start {' '.join(pod.units)}")


def test_volumes_are_mounted_as_kubelet_mounts_them() -> None:
    pod = pod_files(
        daemon_set(
            volumes=[
                {
                    "name": "code",
                    "configMap": {
                        "name": "code",
                        "defaultMode": 0o755,
                        "items": [{"key": "a.py", "path": "pkg/a.py"}],
                    },
                },
                {"name": "run", "hostPath": {"path": "/run/x", "type": "DirectoryOrCreate"}},
                {"name": "state", "hostPath": {"path": "/var/lib/x"}},
            ],
            containers=[
                {
                    "name": "main",
                    "command": ["python3", "-m", "pkg"],
                    "workingDir": "/opt/code",
                    "volumeMounts": [
                        {"name": "code", "mountPath": "/opt/code"},
                        {"name": "run", "mountPath": "/run/x"},
                        {"name": "state", "mountPath": "/host/state", "readOnly": True},
                    ],
                }
            ],
        ),
        [CONFIG_MAP],
    )
    code_dir = f"{POD_ROOT}/agent-pod/code"
    (code,) = [file for file in pod.files if not file.path.startswith(UNIT_DIR)]
    assert (code.path, code.text, code.mode) == (f"{code_dir}/pkg/a.py", "print(1)\n", "0755")
    main = unit(pod, "agent-pod-main.service")
    assert f"BindReadOnlyPaths={code_dir}:/opt/code" in main  # configMap: read-only always
    assert "BindPaths=/run/x:/run/x" in main
    assert "BindReadOnlyPaths=/var/lib/x:/host/state" in main
    # the DirectoryOrCreate path and every mount point, before the pod's other units
    assert "ExecStart=/bin/mkdir -p /run/x /opt/code /host/state" in unit(
        pod, "agent-pod-volumes.service"
    )
    assert pod.units[0] == "agent-pod-volumes.service" and "After=agent-pod-volumes.service" in main
    assert "WorkingDirectory=/opt/code" in main
    assert "ExecStart=python3 -m pkg" in main


def test_a_config_map_without_items_gives_every_key() -> None:
    pod = pod_files(
        daemon_set(
            volumes=[{"name": "code", "configMap": {"name": "code"}}],
            containers=[{"name": "main", "command": ["/bin/true"]}],
        ),
        [CONFIG_MAP],
    )
    paths = sorted(file.path for file in pod.files if not file.path.startswith(UNIT_DIR))
    assert paths == [f"{POD_ROOT}/agent-pod/code/a.py", f"{POD_ROOT}/agent-pod/code/b.json"]


def test_a_command_keeps_its_words_through_systemds_own_expansion() -> None:
    pod = pod_files(
        daemon_set(
            containers=[
                {
                    "name": "main",
                    "command": ["/bin/sh", "-c", "echo $HOME 100% && true"],
                    "env": [{"name": "GREETING", "value": "hello world"}],
                }
            ]
        ),
        [],
    )
    main = unit(pod, "agent-pod-main.service")
    # systemd.service(5): "$$" is a literal $, "%%" a literal %, quotes group a word
    assert "ExecStart=/bin/sh -c 'echo $$HOME 100%% && true'" in main
    assert "Environment='GREETING=hello world'" in main


@pytest.mark.parametrize(
    ("volume", "env"),
    [
        ({"name": "secret", "secret": {"secretName": "s"}}, []),
        (None, [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]),
    ],
)
def test_what_the_stand_in_does_not_model_is_refused(volume: Any, env: Any) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "main", "command": ["/bin/true"], "env": env}]}
    if volume is not None:
        spec["volumes"] = [volume]
    with pytest.raises(ValueError, match="not"):
        pod_files(daemon_set(**spec), [])
