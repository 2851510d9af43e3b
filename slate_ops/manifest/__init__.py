"""The manifest: its in-memory model and its on-disk encoding."""
