"""A pod's last log lines through ``kubectl logs`` (blocking: called from the source's thread).

kubectl is pointed at the source's API server by a kubeconfig written for the call (mode 0600,
removed after): the token never goes on a command line, where other users' ``ps`` would see it.
Every failure is one line: kubectl not found, its exit and first stderr line, or the time limit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile

import orjson

from console.secrets import scrub
from console.sources import KubeTarget

LOGS_TIMEOUT_S = 10.0


def kubeconfig(target: KubeTarget, namespace: str) -> bytes:
    """A kubeconfig (JSON, which kubectl reads as YAML) for the source's server and token."""
    cluster: dict[str, str] = {"server": target.url}
    if target.ca_file:
        cluster["certificate-authority"] = os.path.expanduser(target.ca_file)
    user: dict[str, str] = {}
    token = os.environ.get(target.token_env or "", "").strip() if target.token_env else ""
    if token:
        user["token"] = token
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "enginedeck",
           "clusters": [{"name": "enginedeck", "cluster": cluster}],
           "users": [{"name": "enginedeck", "user": user}],
           "contexts": [{"name": "enginedeck", "context": {"cluster": "enginedeck", "user": "enginedeck",
                                                            "namespace": namespace}}]}
    return orjson.dumps(doc)


def kubectl_logs(target: KubeTarget, namespace: str, pod: str, container: str, tail: int) -> tuple[list[str], str]:
    """(lines, "") or ([], the one-line reason there are none)."""
    exe = shutil.which(target.kubectl)
    if exe is None:
        return [], f"kubectl not found ({target.kubectl!r} is not on PATH): logs of Kubernetes pods need it"
    token = os.environ.get(target.token_env or "", "") if target.token_env else ""
    fd, path = tempfile.mkstemp(prefix="enginedeck-kube-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(kubeconfig(target, namespace))
        args = [exe, "--kubeconfig", path, "logs", "-n", namespace, pod, "--tail", str(tail)]
        if container:
            args += ["-c", container]
        try:
            proc = subprocess.run(args, capture_output=True, timeout=LOGS_TIMEOUT_S, check=False,
                                  env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})
        except subprocess.TimeoutExpired:
            return [], f"kubectl logs gave no answer within {LOGS_TIMEOUT_S:g} s"
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            why = scrub(err[0] if err else "no message", [token] if token else [])
            return [], f"kubectl logs exited {proc.returncode}: {why[:200]}"
        text = scrub(proc.stdout.decode(errors="replace"), [token] if token else [])
        return text.splitlines()[-tail:], ""
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
