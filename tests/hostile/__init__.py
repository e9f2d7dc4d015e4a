"""Hostile input: what engines, streams, URLs, remote hosts and recordings send, made to misbehave.

Every case runs against small fake servers on 127.0.0.1 or crafted files, one file per group:
terminal text, usage claims, signals, credentials, symlinks, damaged recordings, bench counts,
invalid metric values, not-an-engine answers and machine state.
"""
