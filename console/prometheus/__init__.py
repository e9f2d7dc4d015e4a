"""Prometheus as a metrics source (``[sources.NAME]``): read-only engines from a server that scrapes them.

``federate`` splits a ``/federate`` answer into one exposition text per engine (``pod``/``instance``),
``api`` is the HTTP client (``/federate``, ``/api/v1/targets``, ``query_range``; one-line errors),
``backfill`` turns the console's chart series into PromQL and a ``query_range`` matrix into history,
and ``source`` is the polling thread that yields engine snapshots with the source's freshness, like
a remote host's stream (``console.remote``). May import the core (config, model, profiles, sources)
and ``console.telemetry``; never Textual, ``console.ui`` or ``console.lifecycle``.
"""
