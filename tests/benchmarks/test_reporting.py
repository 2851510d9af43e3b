"""The one Markdown table renderer of the benchmarks (benchmarks/reporting.py)."""

from __future__ import annotations

import pytest

from benchmarks.reporting import markdown_table


def test_table_with_aligned_columns() -> None:
    table = markdown_table(["name", "MB/s", "met"], [["a", 1.5, "yes"], ["b", "", "no"]], "lrc")
    assert table.splitlines() == [
        "| name | MB/s | met |",
        "|---|--:|:-:|",
        "| a | 1.5 | yes |",
        "| b |  | no |",
    ]


def test_a_cell_never_splits_the_table() -> None:
    assert markdown_table(["what"], [["a | b\nc"]], "l").splitlines()[2] == "| a \\| b c |"


def test_no_rows_is_a_header_only_table() -> None:
    assert markdown_table(["a", "b"], [], "ll") == "| a | b |\n|---|---|"


@pytest.mark.parametrize(("rows", "align"), [([["x"]], "lr"), ([["x"]], "x"), ([["x", "y"]], "l")])
def test_a_misshapen_table_is_refused(rows: list[list[str]], align: str) -> None:
    with pytest.raises(ValueError):
        markdown_table(["a"] if len(align) == 1 else ["a", "b"], rows, align)
