"""Metrics: from a payload's text to canonical per-model values, windows over time and chart history.

Modules: ``promtext`` (Prometheus text parser) with ``wanted`` (which lines it keeps) and
``promdelta`` (successive scrapes parsed as changes), ``trtjson`` (trtllm-serve JSON iteration
stats), ``normalize`` (raw series -> canonical per-model values via an engine profile) with
``normmemo``, ``readings`` and ``info_gauges``, ``recognize`` (what an unexpected payload is),
``windows`` and ``features`` (rates, windowed quantiles, counter resets), ``history`` (bounded
rings for charts). Pure computation: may import the core (profiles, model) only; no I/O, no
threads, never Textual.
"""
