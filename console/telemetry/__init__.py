"""Telemetry: parsing engine metrics, normalising them to canonical metrics, windows over time.

Modules: ``promtext`` (Prometheus text parser), ``trtjson`` (trtllm-serve JSON iteration stats),
``normalize`` (raw series -> canonical per-model values via an engine profile), ``windows``
(rates, windowed histogram quantiles, counter resets). None of them imports Textual.
"""
