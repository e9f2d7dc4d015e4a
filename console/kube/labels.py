"""Which pods are inference engines, and what their labels say (pure: no I/O).

The label names are the ones the projects' own manifests put on their serving pods:

- vLLM production-stack: ``model`` and ``helm-release-name`` on every engine pod
  (vllm-project/production-stack, helm/templates/deployment-vllm-multi.yaml).
- llm-d: ``llm-d.ai/role`` = prefill | decode, with ``llm-d.ai/inferenceServing: "true"`` and
  ``llm-d.ai/model`` (llm-d/llm-d-model-service, helm/templates/_helpers.tpl, "pdlabels").
- KServe: ``serving.kserve.io/inferenceservice`` = the InferenceService, ``component`` = predictor
  (kserve/kserve, pkg/constants/constants.go: InferenceServicePodLabelKey, KServiceComponentLabel);
  metrics port annotations ``prometheus.kserve.io/port`` / ``prometheus.io/port`` (same file).
- NVIDIA Dynamo: ``nvidia.com/dynamo-component-type`` = worker | prefill | decode (frontend,
  planner, epp are not engines), ``nvidia.com/dynamo-sub-component-type`` = prefill | decode,
  ``nvidia.com/dynamo-base-model``, metrics on the ``system`` port 9090 (ai-dynamo/dynamo,
  deploy/operator/internal/consts/consts.go).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# One labelSelector per stack (the API server ANDs a selector's requirements, so each is a request).
STACK_SELECTORS: tuple[tuple[str, str], ...] = (
    ("production-stack", "model,helm-release-name"),
    ("llm-d", "llm-d.ai/role"),
    ("kserve", "serving.kserve.io/inferenceservice"),
    ("dynamo", "nvidia.com/dynamo-component-type in (worker,prefill,decode)"),
)
PROFILE_LABEL = "enginedeck.io/profile"  # a pod may name its profile outright
PORT_ANNOTATIONS = ("enginedeck.io/metrics-port", "prometheus.kserve.io/port", "prometheus.io/port")
PATH_ANNOTATIONS = ("enginedeck.io/metrics-path", "prometheus.kserve.io/path", "prometheus.io/path")
# Container port names that carry /metrics, most specific first (Dynamo's is "system").
METRICS_PORT_NAMES = ("metrics", "system", "http-metrics", "http", "container-port")
# Container image name parts -> profile.
IMAGE_PROFILES: tuple[tuple[str, str], ...] = (
    ("sglang", "sglang"), ("text-generation-inference", "tgi"), ("llama.cpp", "llamacpp"),
    ("llama-server", "llamacpp"), ("tensorrt", "trtllm"), ("trtllm", "trtllm"), ("vllm", "vllm"),
)
_ENGINE_CONTAINERS = ("vllm", "kserve-container", "main", "sglang", "tgi", "engine")


@dataclass(frozen=True, slots=True)
class PodInfo:
    """One pod as the console uses it."""

    namespace: str
    name: str
    uid: str
    stack: str  # production-stack | llm-d | kserve | dynamo | selector
    role: str  # prefill | decode | "" (unknown)
    model: str  # from the stack's model label; "" when none
    image: str
    profile_hint: str | None  # from the label or the image; None: recognise from the metrics
    port: int | None  # the metrics port; None: none found
    path: str
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    ready: bool
    reason: str  # why not ready: CrashLoopBackOff, ContainerCreating, Unschedulable ...
    pod_ip: str
    container: str  # the engine container's name (for logs)


def stack_of(labels: Mapping[str, str]) -> str | None:
    """Which known stack a pod's labels are; None: none (a router, frontend or other pod)."""
    if labels.get("llm-d.ai/role"):
        return "llm-d"
    if labels.get("nvidia.com/dynamo-component-type") in ("worker", "prefill", "decode"):
        return "dynamo"
    if labels.get("serving.kserve.io/inferenceservice") and labels.get("component", "predictor") == "predictor":
        return "kserve"
    if labels.get("model") and labels.get("helm-release-name"):
        return "production-stack"
    return None


def role_of(labels: Mapping[str, str]) -> str:
    for key in ("llm-d.ai/role", "nvidia.com/dynamo-sub-component-type", "nvidia.com/dynamo-component-type"):
        v = labels.get(key, "").lower()
        if v in ("prefill", "decode"):
            return v
        if v in ("both", "prefill-decode"):
            return "both"
    return ""


def model_of(labels: Mapping[str, str]) -> str:
    for key in ("llm-d.ai/model", "nvidia.com/dynamo-base-model", "serving.kserve.io/inferenceservice", "model"):
        if labels.get(key):
            return labels[key]
    return ""


def profile_from_image(image: str) -> str | None:
    low = image.lower().rsplit("@", 1)[0]
    return next((p for part, p in IMAGE_PROFILES if part in low), None)


def _engine_container(containers: list[dict[str, Any]]) -> dict[str, Any]:
    for c in containers:
        if c.get("name") in _ENGINE_CONTAINERS or profile_from_image(str(c.get("image") or "")):
            return c
    return containers[0] if containers else {}


def _port(annotations: Mapping[str, str], container: dict[str, Any]) -> int | None:
    for key in PORT_ANNOTATIONS:
        v = annotations.get(key, "")
        if v.isdigit():
            return int(v)
    ports = [p for p in container.get("ports") or () if isinstance(p.get("containerPort"), int)]
    for name in METRICS_PORT_NAMES:
        for p in ports:
            if p.get("name") == name:
                return int(p["containerPort"])
    return int(ports[0]["containerPort"]) if ports else None


def _readiness(status: Mapping[str, Any]) -> tuple[bool, str]:
    conds = {c.get("type"): c for c in status.get("conditions") or ()}
    ready = (conds.get("Ready") or {}).get("status") == "True"
    if ready:
        return True, ""
    for cs in status.get("containerStatuses") or ():
        state = cs.get("state") or {}
        for key in ("waiting", "terminated"):
            if key in state:
                s = state[key] or {}
                why = str(s.get("reason") or key)
                return False, why + (f": {s['message']}"[:160] if s.get("message") else "")
        if not cs.get("ready"):
            return False, "container not ready"
    sched = conds.get("PodScheduled") or {}
    if sched.get("status") == "False":
        return False, str(sched.get("reason") or "not scheduled") + (f": {sched['message']}"[:160]
                                                                   if sched.get("message") else "")
    return False, str(status.get("reason") or (conds.get("Ready") or {}).get("reason") or "not ready")


def pod_info(item: Mapping[str, Any], *, stack: str | None = None) -> PodInfo | None:
    """A PodList item as a ``PodInfo``; None when it is no engine (``stack`` None: by its labels)."""
    meta = item.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    stack = stack or stack_of(labels)
    if stack is None or meta.get("deletionTimestamp"):
        return None
    spec, status = item.get("spec") or {}, item.get("status") or {}
    c = _engine_container(list(spec.get("containers") or ()))
    image = str(c.get("image") or "")
    ready, reason = _readiness(status)
    path = next((annotations[k] for k in PATH_ANNOTATIONS if annotations.get(k, "").startswith("/")), "/metrics")
    return PodInfo(namespace=str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""),
                   uid=str(meta.get("uid") or ""), stack=stack, role=role_of(labels), model=model_of(labels),
                   image=image, profile_hint=labels.get(PROFILE_LABEL) or profile_from_image(image),
                   port=_port(annotations, c), path=path, phase=str(status.get("phase") or "Unknown"),
                   ready=ready, reason=reason, pod_ip=str(status.get("podIP") or ""),
                   container=str(c.get("name") or ""))
