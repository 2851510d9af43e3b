"""What the benchmarks share (benchmarks/reporting.py): the table renderer, the end of a run alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import bench_gc, suite
from benchmarks.reporting import command_line, load_cell, markdown_table, publish

REPO = Path(__file__).resolve().parents[2]


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


def test_publish_prints_the_report_and_writes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results" / "x.md"
    publish("# Report\n\n| a |", out)
    printed = capsys.readouterr()
    assert printed.out == "# Report\n\n| a |\n" == out.read_text()
    assert printed.err == f"wrote {out}\n"
    assert not list(out.parent.glob("*.tmp"))

    publish("table", out, file_text='{"json": true}\n')
    assert capsys.readouterr().out == "table\n" and out.read_text() == '{"json": true}\n'

    publish("only printed", None)
    printed = capsys.readouterr()
    assert printed.out == "only printed\n" and printed.err == ""


def test_command_line_names_the_module_and_its_arguments() -> None:
    module = "benchmarks.bench_gc"
    assert command_line(module, ["--rounds", "3"]) == "python -m benchmarks.bench_gc --rounds 3"
    assert command_line(module, []) == "python -m benchmarks.bench_gc"


@pytest.mark.parametrize("module", [b.module for b in suite.BENCHMARKS])
def test_every_benchmark_runs_as_a_module(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:") and "--output" in done.stdout


def test_a_benchmark_run_alone_prints_its_table_and_writes_its_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "gc.md"
    assert bench_gc.main(["--rounds", "12", "--output", str(out)]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith("| scenario | objects | deleted | requests |")
    head = f"# GC requests per run (benchmarks/bench_gc.py)\n\n{bench_gc.describe(12)}\n\n"
    assert out.read_text() == head + printed.out
    assert printed.err == f"wrote {out}\n"


def test_every_summary_row_gets_a_load_average_its_own_or_its_benchmarks() -> None:
    assert load_cell(3.214, [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == "3.21"  # the row's own measurement
    assert load_cell(None, [1.0, 2.0, 3.0], [4.056, 5.0, 6.0]) == "1.00 → 4.06"  # the benchmark's 1 min
    assert load_cell(None, [], []) == "n/a"  # os.getloadavg() unavailable
    own = suite.row("b", "m", "s", 1.0, 2.0, "ref", None, None, load=2.5)
    assert suite.Row.from_json(own.to_json()) == own
    assert suite.Row.from_json({**own.to_json(), "load": None}).load is None
    old = own.to_json()
    del old["load"]  # results written before rows carried their load
    assert suite.Row.from_json(old).load is None
