"""End to end: a real simulator under load -> the hub with simulated GPUs -> `status --json`'s energy:
present, labelled simulated, an estimate where no GPU process is visible (an ad-hoc engine without
PIDs), and its tokens per joule agreeing with its own joules and the engine's token rate."""

from __future__ import annotations

import json
import threading

import pytest

from console.cli import main
from tests.client.simproc import chat_load, sims


def test_status_json_has_energy_labelled_simulated_and_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    with sims(("vllm", "--speed", "4")) as (a,):
        stop = threading.Event()
        workers = [threading.Thread(target=chat_load, args=(a.url, stop), daemon=True) for _ in range(4)]
        for w in workers:
            w.start()
        try:
            code = main(["status", "--engine", a.ref, "--json", "--gpus", "simulated", "--sample", "5"])
        finally:
            stop.set()
            for w in workers:
                w.join(timeout=15)
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    e = doc["engines"][0]
    energy = e["energy"]
    assert energy is not None and energy["simulated"] and energy["source"] == "simulated"
    assert energy["estimate"] and energy["attribution"] == "estimate" and "no GPU process visible" in energy["reason"]
    assert energy["gpus"] == e["gpus"] and energy["gpus"]
    assert energy["joules"] > 0 and energy["power_w"] > 0 and energy["window_s"] > 0
    assert energy["tokens_per_joule"] > 0
    assert energy["joules_per_1k_output_tokens"] == pytest.approx(1000 / energy["tokens_per_joule"], rel=1e-3)
    assert energy["total_tokens_per_joule"] > energy["tokens_per_joule"]
    held = [g for g in doc["gpus"]["devices"] if g["index"] in energy["gpus"]]
    assert all(g["energy_source"] == "simulated" and g["energy_mj"] > 0 for g in held)
    # The engine's joules are its GPUs' joules (the GPUs it has, shares of 1).
    assert energy["joules"] == pytest.approx(sum(g["energy"]["joules"] for g in held), rel=1e-6)
