"""Streaming client, load generator and engine comparison benchmark (no UI imports)."""
