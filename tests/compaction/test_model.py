"""The writer's stateful model test, with compactions (local executor) between the steps."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

from slate_ops.compaction import Compactor, CompactorOptions
from tests.engine.test_model import WriterModel

OPTIONS = CompactorOptions(min_sources=2, max_sources=4, max_subcompaction_bytes=512, target_sst_bytes=256)


class CompactingWriterModel(WriterModel):
    def __init__(self) -> None:
        super().__init__()
        self.compactor = Compactor("db", self.store, OPTIONS)

    @rule(full=st.booleans())
    def compact(self, full: bool) -> None:
        self.compactor.run_once(full=full)  # the invariant then checks the db against the model

    @rule()
    def restart_compactor(self) -> None:
        self.compactor.close()
        self.compactor = Compactor("db", self.store, OPTIONS)

    def teardown(self) -> None:
        self.compactor.close()
        super().teardown()


CompactingWriterModel.TestCase.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
TestCompactingWriterModel = CompactingWriterModel.TestCase
