"""The bad-input catalogue (issue 8): everything a user or the environment can get wrong.

One table of cases (:mod:`.catalogue`). Each builds a store state (``setup``, mostly from
:mod:`.states`), does one thing to it (``action``: a Python call, or a ``slate-ops`` command line),
and expects a typed error (a :class:`SlateOpsError` subclass, never a bare
``KeyError``/``ValueError``/``struct.error``/botocore error) or a CLI exit code (2: usage, 1:
operation error with one ``slate-ops: error:`` line on stderr), with a message that contains given
substrings -- the object's key or path, and the fix -- and a store that is left as it was, by one of
three standards (``writes``):

``none``
    Every object's key and etag are the same before and after (``snapshot``).
``net``
    The operation had to write before it could fail (opening a writer or a compactor fences the
    previous one; a reader pins its state with a checkpoint before reading it): objects that
    existed are unchanged, the only new ones are manifest / ``.compactions`` versions and empty WAL
    fence objects, and the latest manifest has the same checkpoints and the same data (L0, sorted
    runs, SSTs) as before -- nothing was left behind.
``unconfirmed``
    A damaged GC boundary file: the version was written before the boundary could be read (spec
    002 checks the boundary after the create), so the error names that version as unconfirmed.

One module per group, listed in :data:`GROUPS` in the catalogue's order: damaged stored objects
(manifests, SSTs, WAL SSTs, ``.compactions``, boundary files), keys and values, ranges, split and
merge, checkpoints, other operator mistakes, every CLI command with missing or malformed arguments
(generated from the argparse parser), commands on a missing database, and S3 credentials. Spark's
``read_db`` is left out (it reads through the same ``DbReader`` code).

Each group module registers its cases when it is imported; importing this package imports them all,
in :data:`GROUPS` order, so the catalogue's order (and :func:`.catalogue.summary`'s) does not depend
on which module is imported first. ``tests/reliability/test_bad_inputs.py`` runs the cases;
``python -m tests.reliability.test_bad_inputs`` prints the catalogue's size per group.
"""

from __future__ import annotations

import importlib

GROUPS = (
    "damaged_objects",
    "keys_and_values",
    "ranges",
    "rescale",
    "checkpoints",
    "operator_mistakes",
    "cli_usage",
    "missing_database",
    "s3_credentials",
)

for _group in GROUPS:
    importlib.import_module(f"{__name__}.{_group}")
