"""The engines behind a database: slate_ops' own and SlateDB's (through its optional binding).

* :mod:`slate_ops.engines.detect` -- which engine wrote a manifest, from its bytes alone (pure: no
  binding import, no store access);
* :mod:`slate_ops.engines.slatedb` -- SlateDB databases maintained through the ``slatedb``
  binding (the extra ``slate_ops[slatedb]``), imported lazily: this package imports without it.

Design and the plan for the one admin handle over both: docs/design/slatedb-engine.md.
"""

from slate_ops.engines.detect import Detection, Engine, detect_manifest

__all__ = ["Detection", "Engine", "detect_manifest"]
