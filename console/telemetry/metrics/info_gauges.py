"""Info gauges read from a label (vLLM ``lora_requests_info``: the value is a timestamp, the facts
are comma-joined lists in labels). Used by ``normalize`` for mappings with ``from_label``."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Protocol

from console.telemetry.metrics.promtext import Sample

__all__ = ["adopt_unlabelled", "from_label", "label_items"]


class _Acc(Protocol):
    gauges: dict[str, float]
    counters: dict[str, Any]
    histograms: dict[str, Any]
    invalid: dict[str, Any]


def adopt_unlabelled(models: MutableMapping[str, Any], canonicals: list[str]) -> None:
    """Engine-wide info gauges without the model label (vLLM lora_requests_info) belong to every
    served model, not to a model "" of their own."""
    orphan: _Acc | None = models.get("")
    if orphan is None or len(models) < 2 or orphan.counters or orphan.histograms:
        return
    if not set(orphan.gauges) <= set(canonicals):
        return
    del models[""]
    for acc in models.values():
        for canonical, value in orphan.gauges.items():
            acc.gauges.setdefault(canonical, value)
        for canonical, figure in orphan.invalid.items():
            acc.invalid.setdefault(canonical, figure)


def adopt_engine_counters(models: MutableMapping[str, Any]) -> None:
    """Engine-wide counters without the model label (vLLM's http_requests_total{status="5xx"}, added
    into its failed requests) belong to the engine's one served model, not to a model "" of their
    own. An engine serving several models keeps them apart: which model failed is not known."""
    orphan: Any = models.get("")
    if orphan is None or len(models) != 2 or orphan.gauges or orphan.histograms:
        return
    del models[""]
    (acc,) = models.values()
    for canonical, series in orphan.counters.items():
        acc.counters.setdefault(canonical, {}).update(series)
    for canonical, series in orphan.created.items():
        acc.created.setdefault(canonical, {}).update(series)
    for canonical, figure in orphan.invalid.items():
        acc.invalid.setdefault(canonical, figure)


def label_items(text: str) -> list[str]:
    """The items of a comma-joined label value; "" has none."""
    return [item.strip() for item in text.split(",") if item.strip()]


def from_label(samples: list[Sample], label: str, model_label: str) -> list[Sample]:
    """An info gauge read from a label: per model, the newest sample (largest value, a timestamp)
    with its value replaced by the label's number, or the count of its comma-joined items."""
    newest: dict[str, Sample] = {}
    for sample in samples:
        model = dict(sample[1]).get(model_label, "") if model_label else ""
        kept = newest.get(model)
        if kept is None or sample[2] > kept[2]:
            newest[model] = sample
    out: list[Sample] = []
    for name, labels, _value in newest.values():
        text = dict(labels).get(label, "").strip()
        try:
            value = float(text)
        except ValueError:
            value = float(len(label_items(text)))
        kept_labels = tuple(kv for kv in labels if kv[0] == model_label)  # one series per model
        out.append(Sample(name, kept_labels, value))
    return out
