"""Remote hosts over SSH: each host's ``enginedeck status --json --watch`` stream, and one fleet of them.

``stream`` runs the user's OpenSSH client for one host (a process group of its own, killed on
stop), parses each stdout line as a status document (``console.status_parse``), scrubs its stderr
of secrets and reconnects with backoff; ``fleet`` is a ``FleetSource`` that joins this machine's
hub (if it watches local engines), every host and every Prometheus source (``console.prometheus``)
into one ``FleetSnapshot``, engines named ``HOST/NAME`` (``SOURCE/IDENT``); ``tunnel`` holds the
``ssh -NL`` forwards of a host's Docker socket and of its engines' ports (one per host and port,
reused, ended by PID group). No SSH library: only the ``ssh`` command. May import the core (config,
hosts, model, secrets, status_parse), ``console.telemetry`` (hub, history, the source contract),
``console.prometheus`` and ``console.kube`` (the sources it joins); never
Textual, ``console.ui`` or ``console.lifecycle``.
"""
