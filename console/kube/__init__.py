"""Kubernetes sources: ``[sources.NAME] kubernetes = "https://api:6443"``.

Engine pods are found by the labels their stacks put on them (production-stack, llm-d, KServe,
Dynamo: ``labels``) or a configured label selector; their metrics are read through the API
server's pod proxy (``api``), their logs with ``kubectl logs`` (``logs``), and nothing in the
cluster is changed (their engines are read-only). ``source`` is the reading thread. May import the
core (model, profiles, secrets, sources), ``console.telemetry`` and ``console.prometheus.federate``
(profile by metric names); never Textual, ``console.ui`` or ``console.lifecycle``.
"""
