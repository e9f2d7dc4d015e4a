"""A Kubernetes source against a fake API server on 127.0.0.1 that answers recorded pod lists
(tests/fixtures/k8s/) and proxies the pod proxy path to real simulators: discovery by each stack's
labels and by a selector, metrics through the proxy, pods not Ready or gone, RBAC refusals, the
bearer token, an unreachable server, and logs through a real kubectl."""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from console.config import parse_config
from console.errors import ConfigError
from console.kube.api import KubeClient
from console.kube.logs import kubectl_logs
from console.kube.source import KubeSource
from console.model import Phase
from console.ports import free_port
from console.profiles import load_profiles
from console.remote.fleet import RemoteFleet
from console.sim.fleet import Fleet, start_fleet
from console.sources import KubeTarget
from console.status_doc import status_json
from console.telemetry.metrics.normalize import normalize
from tests.kube.apiserver import FakeApiServer, self_signed

FILES = ["production-stack.json", "llm-d.json", "kserve.json", "dynamo.json"]
PS = "vllm-llama3-deployment-vllm-6c9f7d8b54-x2kqp"
PREFILL = "ms-qwen-llm-d-modelservice-prefill-5b8c6d7f9-rq2lm"
DECODE = "ms-qwen-llm-d-modelservice-decode-6f9d4c8b7-kz7wp"
KSERVE = "qwen-predictor-00001-deployment-7f8b9c5d6-mv4tn"
DYNAMO = "sglang-agg-sglangdecodeworker-6b7c8d9f5-p4q2r"
CREATING = "sglang-agg-sglangprefillworker-5c6d7e8f9-b8n3k"
CRASHING = "sglang-agg-sglangdecodeworker-6b7c8d9f5-zz9x1"
ENGINES = {f"{PS}.llm", f"{PREFILL}.llm-d", f"{DECODE}.llm-d", f"{KSERVE}.kserve-test", f"{DYNAMO}.dynamo",
           f"{CREATING}.dynamo", f"{CRASHING}.dynamo"}
TOKEN = "kube-test-token-5f1c9a7e"


@pytest.fixture(scope="module")
def sims() -> Iterator[Fleet]:
    fleet = start_fleet(["vllm", "sglang", "tgi"], load=False, seed=5)
    try:
        yield fleet
    finally:
        fleet.stop()


def _url(fleet: Fleet, profile: str) -> str:
    return next(u for p, u, _pid in fleet.endpoints if p == profile)


@pytest.fixture
def api(sims: Fleet) -> Iterator[FakeApiServer]:
    vllm, sglang, tgi = (_url(sims, p) for p in ("vllm", "sglang", "tgi"))
    backends = {("llm", PS): vllm, ("llm-d", PREFILL): vllm, ("llm-d", DECODE): vllm,
                ("kserve-test", KSERVE): tgi, ("dynamo", DYNAMO): sglang}
    server = FakeApiServer(FILES, backends, token=TOKEN)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBE_TEST_TOKEN", TOKEN)


def _source(api: FakeApiServer, **kw: object) -> KubeSource:
    target = KubeTarget("k8s", api.url, token_env="KUBE_TEST_TOKEN", **kw)  # type: ignore[arg-type]
    return KubeSource(target, load_profiles())


def _engines(src: KubeSource) -> dict[str, object]:
    _view, snap, _a = src.view()
    assert snap is not None
    return {e.name: e for e in snap.engines}


def test_discovery_by_each_stacks_labels(api: FakeApiServer) -> None:
    src = _source(api)
    src.read_once()
    pods = src.pods()
    assert set(pods) == ENGINES  # routers, the EPP, the KServe transformer, Dynamo's frontend are not engines
    stacks = {k: p.stack for k, p in pods.items()}
    assert stacks[f"{PS}.llm"] == "production-stack"
    assert stacks[f"{PREFILL}.llm-d"] == stacks[f"{DECODE}.llm-d"] == "llm-d"
    assert stacks[f"{KSERVE}.kserve-test"] == "kserve"
    assert stacks[f"{DYNAMO}.dynamo"] == "dynamo"
    sent = [p for p in api.paths if p.startswith("/api/v1/pods?")]
    assert len(sent) == 4, sent  # one labelSelector request per stack
    assert pods[f"{DECODE}.llm-d"].port == 8200  # the vLLM container's, not the routing sidecar's 8000
    assert pods[f"{KSERVE}.kserve-test"].port == 8080  # prometheus.kserve.io/port
    assert pods[f"{DYNAMO}.dynamo"].port == 9090  # Dynamo's "system" port
    assert src.resource_version == "48377"


def test_engines_snapshots_profiles_roles_and_pod_states(api: FakeApiServer) -> None:
    src = _source(api, namespace=None)
    src.read_once()
    time.sleep(0.3)
    src.read_once()
    e = _engines(src)
    ps, pre, dec, ks, dy = (e[k] for k in (f"{PS}.llm", f"{PREFILL}.llm-d", f"{DECODE}.llm-d",
                                            f"{KSERVE}.kserve-test", f"{DYNAMO}.dynamo"))
    for x in (ps, pre, dec, ks, dy):
        assert x.phase == Phase.READY and x.reachable and x.live, (x.name, x.phase, x.health_detail)  # type: ignore[attr-defined]
        assert x.source == "k8s"  # type: ignore[attr-defined]
    assert (ps.profile, pre.profile, dy.profile) == ("vllm", "vllm", "sglang")  # type: ignore[attr-defined]
    assert ks.profile == "tgi"  # type: ignore[attr-defined]  # image names no engine: from the metrics payload
    assert (pre.role, dec.role, dy.role) == ("prefill", "decode", "decode")  # type: ignore[attr-defined]
    creating, crashing = e[f"{CREATING}.dynamo"], e[f"{CRASHING}.dynamo"]
    assert creating.phase == Phase.CREATING and "pod Pending: ContainerCreating" in creating.health_detail  # type: ignore[attr-defined]
    assert crashing.phase == Phase.FAILED and "CrashLoopBackOff" in crashing.health_detail  # type: ignore[attr-defined]
    assert not creating.live and not crashing.live  # type: ignore[attr-defined]


def test_a_selector_replaces_the_known_labels(api: FakeApiServer) -> None:
    src = _source(api, selector="component=predictor", namespace="kserve-test")
    src.read_once()
    assert set(src.pods()) == {KSERVE}
    assert src.pods()[KSERVE].stack == "selector"
    assert any("/api/v1/namespaces/kserve-test/pods?labelSelector=component%3Dpredictor" in p for p in api.paths)


def test_metrics_through_the_pod_proxy_equal_a_direct_scrape(api: FakeApiServer, sims: Fleet) -> None:
    client = KubeClient(KubeTarget("k8s", api.url, token_env="KUBE_TEST_TOKEN"))
    prof = load_profiles()["vllm"]
    try:
        proxied = client.metrics("llm", PS, 8000)
    finally:
        client.close()
    with urllib.request.urlopen(_url(sims, "vllm") + "/metrics", timeout=5) as r:
        direct = r.read()
    a, b = normalize(prof, proxied, full=True), normalize(prof, direct, full=True)
    assert a.resolved and set(a.resolved) == set(b.resolved)
    assert _counters(a) == _counters(b) and _counters(a)  # unloaded simulator: the counters stand still


def _counters(reading: Any) -> dict[tuple[str, str], float]:
    return {(m, c): sum(s.values()) for m, mr in reading.models.items() for c, s in mr.counters.items()}


def test_bearer_token_is_sent_and_never_shown(api: FakeApiServer) -> None:
    fleet = RemoteFleet([], sources=[KubeTarget("k8s", api.url, token_env="KUBE_TEST_TOKEN", namespace="llm")],
                        refresh=0.2)
    fleet.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(e.live for e in fleet.latest().engines):
            time.sleep(0.1)
        snap = fleet.latest()
        assert [e.name for e in snap.engines] == [f"k8s/{PS}"] and snap.engines[0].live
        doc = status_json(snap)
    finally:
        fleet.stop()
    assert f"Bearer {TOKEN}" in api.auth_seen
    assert TOKEN not in doc and TOKEN not in repr(snap)
    host = json.loads(doc)["hosts"][0]
    assert host["kind"] == "kubernetes" and host["kubernetes"] == api.url and host["ssh"] is None


def test_a_wrong_or_missing_token_is_a_clear_reason(api: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBE_TEST_TOKEN", "wrong")
    src = _source(api)
    src.read_once()
    view = src.view()[0]
    assert view.freshness.stale and "401" in view.freshness.reason and "$KUBE_TEST_TOKEN" in view.freshness.reason
    assert "wrong" not in view.freshness.reason
    monkeypatch.delenv("KUBE_TEST_TOKEN")
    src.read_once()
    assert "$KUBE_TEST_TOKEN is not set" in src.view()[0].freshness.reason


def test_rbac_403_names_the_missing_permission(api: FakeApiServer) -> None:
    api.forbid = {"list"}
    src = _source(api, namespace="llm")
    src.read_once()
    view = src.view()[0]
    assert view.freshness.stale
    assert "RBAC lacks 'list pods' in namespace llm" in view.freshness.reason, view.freshness.reason
    api.forbid = {"proxy"}
    src.read_once()
    e = _engines(src)[PS]
    assert not src.view()[0].freshness.stale  # the list works: only the engine is unreachable
    assert e.phase == Phase.UNREACHABLE and "RBAC lacks 'get pods/proxy'" in e.health_detail  # type: ignore[attr-defined]


def test_unreachable_api_server_marks_the_source_stale() -> None:
    src = KubeSource(KubeTarget("k8s", f"http://127.0.0.1:{free_port()}", timeout=1.0), load_profiles())
    started = time.monotonic()
    src.read_once()
    view = src.view()[0]
    assert time.monotonic() - started < 3
    assert view.freshness.stale and "pod list: ConnectError" in view.freshness.reason, view.freshness.reason


def test_a_pod_that_goes_away_becomes_gone(api: FakeApiServer) -> None:
    src = _source(api, namespace="llm-d", list_every=1.0)
    src.read_once()
    assert _engines(src)[DECODE].phase == Phase.READY  # type: ignore[attr-defined]
    api.remove("llm-d", DECODE)
    time.sleep(1.05)
    src.read_once()
    gone = _engines(src)[DECODE]
    assert gone.phase == Phase.EXITED and "pod gone" in gone.health_detail and not gone.reachable  # type: ignore[attr-defined]
    assert _engines(src)[PREFILL].phase == Phase.READY  # type: ignore[attr-defined]


@pytest.fixture
def tls_api(sims: Fleet, tmp_path: Path) -> Iterator[tuple[FakeApiServer, str]]:
    cert, key = self_signed(tmp_path)
    server = FakeApiServer(FILES, {("llm", PS): _url(sims, "vllm")}, token=TOKEN, tls=(cert, key))
    try:
        yield server, cert
    finally:
        server.stop()


def test_https_with_a_ca_file(tls_api: tuple[FakeApiServer, str]) -> None:
    api, cert = tls_api
    src = KubeSource(KubeTarget("k8s", api.url, token_env="KUBE_TEST_TOKEN", ca_file=cert, namespace="llm"),
                     load_profiles())
    src.read_once()
    assert _engines(src)[PS].phase == Phase.READY  # type: ignore[attr-defined]
    untrusted = KubeSource(KubeTarget("k8s", api.url, token_env="KUBE_TEST_TOKEN", namespace="llm"), load_profiles())
    untrusted.read_once()
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.view()[0].freshness.reason


@pytest.mark.kubectl
def test_logs_through_kubectl(tls_api: tuple[FakeApiServer, str]) -> None:
    # kubectl sends a bearer token only over https: the server has a certificate made for the test.
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl not found: install it (scripts/provision/kubectl.sh: Debian's kubernetes-client), "
                    "or set ENGINEDECK_SKIP_KUBECTL=1", pytrace=False)
    api, cert = tls_api
    api.logs[("llm", PS)] = [f"INFO line {i}" for i in range(50)]
    target = KubeTarget("k8s", api.url, token_env="KUBE_TEST_TOKEN", ca_file=cert, namespace="llm")
    lines, why = kubectl_logs(target, "llm", PS, "vllm", 5)
    assert why == "" and lines == [f"INFO line {i}" for i in range(45, 50)], why
    assert any("/log?" in p and "tailLines=5" in p for p in api.paths), api.paths[-5:]
    assert f"Bearer {TOKEN}" in api.auth_seen
    missing = replace(target, kubectl="kubectl-not-installed-here")
    lines, why = kubectl_logs(missing, "llm", PS, "vllm", 5)
    assert lines == [] and why.startswith("kubectl not found")


def test_kubernetes_source_config() -> None:
    cfg = parse_config({"sources": {"k8s": {"kubernetes": "https://api.example:6443", "token_env": "KUBE_TOKEN",
                                            "namespace": "llm", "selector": "app in (vllm, sglang),!canary"}}},
                       "c.toml")
    (t,) = cfg.sources
    assert isinstance(t, KubeTarget) and t.namespace == "llm" and t.token_env == "KUBE_TOKEN"
    for bad, key in (({"kubernetes": "https://a:6443", "token": "abc"}, "token"),
                     ({"kubernetes": "https://a:6443", "token_env": "eyJhbGciOi.abc"}, "token_env"),
                     ({"kubernetes": "https://a:6443", "selector": '{job="vllm"}'}, "selector"),
                     ({"kubernetes": "https://a:6443", "prometheus": "http://p:9090"}, "one of"),
                     ({"prometheus": "http://p:9090", "namespace": "llm"}, "kubernetes source")):
        with pytest.raises(ConfigError) as exc:
            parse_config({"sources": {"k8s": bad}}, "c.toml")
        assert key in str(exc.value), (bad, str(exc.value))
