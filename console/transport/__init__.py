"""Transport: the console's own HTTP/1.1 client (``http``), below every package that talks to engines.

The collectors (``console.telemetry``: metrics probes), the engine client (``console.client``:
streaming requests, the load generator, the bench) and the UI's playground and bench screens all
send their requests through ``http.HTTPClient``: kept-alive connections per engine, timeouts, a
cap on the body, cancellation that aborts the connection. It sits below them so that telemetry
need not import the client package. May import nothing else of the console (only the standard
library); never Textual or ``console.ui``.
"""
