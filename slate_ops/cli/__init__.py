"""The ``slate-ops`` command: :func:`main` parses and dispatches; one module per command group."""

from slate_ops.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
