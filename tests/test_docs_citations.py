"""The docs match the code (issue 22): every section of a document cited from code or from another
document exists, and what the documents name (links, module paths, module tables, dotted names,
python examples) exists in the repository.

Citations are read from the comments and strings (docstrings, messages) of ``slate_ops/``,
``benchmarks/`` and ``tests/``, in the forms this repository uses:

* ``docs/x.md#anchor``: a heading whose GitHub anchor is ``anchor``;
* ``docs/design/x.md, "Section name"`` (also without the comma, or in parentheses): a section
  heading (not the document's title) that contains the name (case-insensitive); several names in a
  row (``"A", "B"``) are each checked;
* ``docs/design/x.md §N``: a heading that starts with ``N.``;
* a bare ``engine.md "Section"``: the document of that name at the root, else the only one under
  ``docs/`` (else the only one in the repository).

The documents cite each other the same way, also as a link: ``[gc.md](gc.md), "Section"``.

A cited document path (``docs/...``, ``benchmarks/...``, a bare name with a section, or a bare
upper-case name such as ``README.md``) must exist. Headings inside fenced code blocks do not count.
The documents' own relative links must point at files (and headings) that exist; every module path
(``engine/db.py``, ``slate_ops/layout.py``) a document names is a file of the repository, and the
module tables of :data:`MODULE_TABLES` name every module of their package; every dotted
``slate_ops.x.y`` a document names imports; every python example parses and imports what exists
(docs/design/gc.md's is run); no design is cited as "spec 000" (a number the reader cannot look up).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("slate_ops", "benchmarks", "tests")
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.md)(?:#([\w-]+))?")
_REF = re.compile(r'\s*(?:``|`)?\s*(?:,|\band\b|\()?\s*(?:"([^"\n]{1,80})"|“([^”\n]{1,80})”|§(\d+))')
_STRING = re.compile(r"^[rbfuRBFU]*('''|\"\"\"|'|\")(.*)\1$", re.DOTALL)
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK_CITATION = re.compile(r'\[[^\]]*\]\(([^)#\s]+\.md)(?:#([\w-]+))?\)\)?,?\s*\(?"([^"\n]{1,80})"')
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


@dataclass(frozen=True)
class Citation:
    source: str  # file:line
    document: str  # as written
    anchor: str | None
    refs: tuple[str, ...]  # quoted names and "§N"


def _text_blocks(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment block (consecutive comment lines joined) and every string
    (adjacent literals concatenated), whitespace collapsed."""
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    comments: list[str] = []
    strings: list[str] = []
    comment_line = string_line = last_comment = 0
    skip = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for token in tokens:
        if token.type == tokenize.COMMENT:
            if comments and token.start[0] != last_comment + 1:
                yield comment_line, " ".join(" ".join(comments).split())
                comments = []
            if not comments:
                comment_line = token.start[0]
            comments.append(token.string.lstrip("#"))
            last_comment = token.start[0]
            continue
        if token.type == tokenize.STRING:
            if not strings:
                string_line = token.start[0]
            match = _STRING.match(token.string)
            strings.append(match.group(2) if match else token.string)
            continue
        if token.type in skip:
            continue
        if strings:
            yield string_line, " ".join("".join(strings).split())
            strings = []
    if comments:
        yield comment_line, " ".join(" ".join(comments).split())
    if strings:
        yield string_line, " ".join("".join(strings).split())


def citations() -> list[Citation]:
    found: list[Citation] = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if ".venv" in path.parts or path == Path(__file__).resolve():  # this file's examples
                continue
            for line, text in _text_blocks(path):
                for match in _PATH.finditer(text):
                    refs: list[str] = []
                    position = match.end()
                    while ref := _REF.match(text, position):
                        refs.append(ref.group(1) or ref.group(2) or f"§{ref.group(3)}")
                        position = ref.end()
                    document, anchor = match.group(1), match.group(2)
                    cited_path = "/" in document and document.split("/")[0] in ("docs", "benchmarks")
                    root_document = "/" not in document and document[:-3].isupper()  # README.md, ...
                    if not (refs or anchor or cited_path or root_document):
                        continue  # a file name in code ("engine.md" as a results file), not a citation
                    source = f"{path.relative_to(ROOT)}:{line}"
                    found.append(Citation(source, document, anchor, tuple(refs)))
    return found


def doc_citations() -> list[Citation]:
    """Citations in README.md and docs/: links followed by a section name, and the code's forms."""
    found: list[Citation] = []
    for document in DOCUMENTS:
        text = " ".join(document.read_text().split())
        source = str(document.relative_to(ROOT))
        for match in _LINK_CITATION.finditer(text):
            target = (document.parent / match.group(1)).resolve()
            cited = str(target.relative_to(ROOT)) if target.is_relative_to(ROOT) else match.group(1)
            found.append(Citation(source, cited, match.group(2), (match.group(3),)))
        for match in _PATH.finditer(text):
            refs: list[str] = []
            position = match.end()
            while ref := _REF.match(text, position):
                refs.append(ref.group(1) or ref.group(2) or f"§{ref.group(3)}")
                position = ref.end()
            if refs:
                cited = match.group(1)
                if (document.parent / cited).is_file():  # relative to the document, like its links
                    cited = str((document.parent / cited).resolve().relative_to(ROOT))
                found.append(Citation(source, cited, match.group(2), tuple(refs)))
    return found


def _resolve(document: str) -> Path | None:
    if "/" in document or (ROOT / document).is_file():
        path = ROOT / document
        return path if path.is_file() else None
    candidates = [p for p in DOCUMENTS if p.name == document] or sorted(ROOT.glob(f"**/{document}"))
    candidates = [p for p in candidates if ".venv" not in p.parts]
    return candidates[0] if len(candidates) == 1 else None


@cache
def headings(path: Path) -> tuple[str, ...]:
    return tuple(text for _, text in _levelled_headings(path))


@cache
def sections(path: Path) -> tuple[str, ...]:
    """The headings below the document's title (a name that matches only the title cites no section)."""
    return tuple(text for level, text in _levelled_headings(path) if level > 1)


@cache
def _levelled_headings(path: Path) -> tuple[tuple[int, str], ...]:
    found: list[tuple[int, str]] = []
    fenced = False
    for line in path.read_text().splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced and (match := _HEADING.match(line)):
            found.append((len(match.group(1)), match.group(2)))
    return tuple(found)


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[`*_]", "", text).lower().split())


def problems(citation: Citation) -> list[str]:
    path = _resolve(citation.document)
    if path is None:
        return [f"{citation.source}: cites {citation.document}, which is not a file of the repository"]
    titles = headings(path)
    found: list[str] = []
    anchors = {github_anchor(t) for t in titles}
    if (
        citation.anchor
        and citation.anchor not in anchors
        and citation.anchor.rstrip("-0123456789") not in anchors
    ):
        found.append(f"{citation.source}: {citation.document}#{citation.anchor}: no heading with that anchor")
    for ref in citation.refs:
        if ref.startswith("§"):
            ok = any(re.match(rf"{ref[1:]}\.\s", t) for t in titles)
        else:
            ok = any(_plain(ref) in _plain(t) for t in sections(path))
        if not ok:
            where = path.relative_to(ROOT)
            found.append(f"{citation.source}: {citation.document}, {ref!r}: no such section in {where}")
    return found


def test_the_scanner_finds_the_citation_forms() -> None:
    found = citations()
    assert len(found) > 100
    assert any(c.refs and c.refs[0].startswith("§") for c in found)
    assert any(c.refs and not c.refs[0].startswith("§") for c in found)


def test_a_stale_citation_is_caught(tmp_path: Path) -> None:
    assert problems(Citation("x.py:1", "docs/design/engine.md", None, ("No such section",)))
    assert problems(Citation("x.py:1", "docs/design/slatedb-engine.md", None, ("§99",)))
    assert problems(Citation("x.py:1", "docs/cli.md", "no-such-anchor", ()))
    assert problems(Citation("x.py:1", "docs/design/nothing.md", None, ()))
    assert not problems(Citation("x.py:1", "docs/design/slatedb-engine.md", "6-capability-table", ("§6",)))
    assert not problems(Citation("x.py:1", "engine.md", None, ("Memory",)))
    assert problems(Citation("x.py:1", "docs/design/engine.md", None, ("The engine",)))  # the title only


def test_every_cited_section_exists() -> None:
    stale = [problem for citation in citations() for problem in problems(citation)]
    assert not stale, "stale citations of docs:\n" + "\n".join(stale)


def test_every_section_the_docs_cite_exists() -> None:
    found = doc_citations()
    assert any(c.source.startswith("docs/") for c in found)
    stale = [problem for citation in found for problem in problems(citation)]
    assert not stale, "stale citations between docs:\n" + "\n".join(stale)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_in_the_docs_exists(document: Path) -> None:
    broken: list[str] = []
    fenced = False
    for number, line in enumerate(document.read_text().splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        for match in _LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            linked = (document.parent / file_part).resolve() if file_part else document
            where = f"{document.relative_to(ROOT)}:{number}: {target}"
            if not linked.exists():
                broken.append(f"{where}: no such file")
            elif (
                anchor
                and linked.suffix == ".md"
                and anchor not in {github_anchor(t) for t in headings(linked)}
            ):
                broken.append(f"{where}: no heading with that anchor")
    assert not broken, "broken links:\n" + "\n".join(broken)


_MODULE = re.compile(r"(?<![\w/.-])((?:[A-Za-z_][\w.-]*/)*[A-Za-z_]\w*\.py)\b")
_NOT_OURS = {"your_project/definitions.py"}  # docs/orchestration.md's example of the user's project


def test_every_module_a_document_names_exists() -> None:
    """Module tables (docs/design/engine.md's, gc.md's, ...) and prose name files that exist: as
    written from the root, under ``slate_ops/``, or as the end of one path of the repository."""
    folders = [p for p in ROOT.iterdir() if p.is_dir() and p.name not in (".venv", ".git", "build")]
    files = {str(p.relative_to(ROOT)) for folder in folders for p in folder.rglob("*.py")}
    files |= {p.name for p in ROOT.glob("*.py")}
    missing: list[str] = []
    for document in DOCUMENTS:
        for number, line in enumerate(document.read_text().splitlines(), 1):
            for match in _MODULE.finditer(line):
                module = match.group(1)
                if module in _NOT_OURS or module in files or f"slate_ops/{module}" in files:
                    continue
                if not any(f.endswith("/" + module) for f in files):
                    missing.append(f"{document.relative_to(ROOT)}:{number}: {module}")
    assert not missing, "documents name modules that do not exist:\n" + "\n".join(missing)


def _python_blocks(document: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", document.read_text(), re.DOTALL | re.MULTILINE)


def test_the_gc_example_runs() -> None:
    """docs/design/gc.md's example, as written, on a database in memory (the loop told to stop)."""
    import threading

    from slate_ops import admin
    from slate_ops.objstore import MemoryStore

    (example,) = _python_blocks(ROOT / "docs" / "design" / "gc.md")
    store = MemoryStore()
    admin.create_db("db", store)
    stop_event = threading.Event()
    stop_event.set()
    namespace: dict[str, object] = {"store": store, "stop_event": stop_event}
    exec(compile(example, "docs/design/gc.md", "exec"), namespace)
    assert namespace["report"] is not None


def test_no_design_is_cited_by_a_number_the_reader_cannot_look_up() -> None:
    """ "spec 000", "spec 002", ... were numbers of documents that are not in the repository; the
    published designs are named by title (docs/design/README.md lists them)."""
    numbered = re.compile(r"\bspec \d{3}\b", re.IGNORECASE)
    texts = [*DOCUMENTS, *(ROOT / "benchmarks" / "notes").glob("*.md")]
    texts += [p for folder in SOURCES for p in (ROOT / folder).rglob("*.py") if p != Path(__file__).resolve()]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in texts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if numbered.search(line)
    ]
    assert not found, "designs cited by number:\n" + "\n".join(found)


# The documents whose module table (or text) covers a whole package: every module is named there.
MODULE_TABLES = {
    "docs/design/engine.md": "slate_ops/engine",
    "docs/design/gc.md": "slate_ops/gc",
    "docs/design/compaction.md": "slate_ops/compaction",
    "docs/design/spark.md": "slate_ops/spark",
    "docs/orchestration.md": "slate_ops/orchestration",
}


@pytest.mark.parametrize("document", sorted(MODULE_TABLES))
def test_a_module_table_names_every_module_of_its_package(document: str) -> None:
    package = ROOT / MODULE_TABLES[document]
    text = (ROOT / document).read_text()
    short = package.relative_to(ROOT / "slate_ops")
    unnamed = [
        module.name
        for module in sorted(package.glob("*.py"))
        if module.name not in ("__init__.py", "__main__.py")
        and not re.search(rf"(?<![\w./-])(?:slate_ops/)?(?:{short}/)?{re.escape(module.name)}\b", text)
    ]
    assert not unnamed, f"{document} does not name these modules of {MODULE_TABLES[document]}: {unnamed}"


def test_every_dotted_name_a_document_uses_exists() -> None:
    """``slate_ops.layout.sst_key``, ``slate_ops.gc.task.GcTask``, ...: the module imports and
    has the attribute (Spark settings such as ``spark.slate_ops.s3.*`` are not names)."""
    import importlib

    names: dict[str, str] = {}
    for document in DOCUMENTS:
        for number, line in enumerate(document.read_text().splitlines(), 1):
            for match in re.finditer(r"(?<![\w.])slate_ops(?:\.[A-Za-z_]\w*)+", line):
                names.setdefault(match.group(0), f"{document.relative_to(ROOT)}:{number}")
    missing: list[str] = []
    for name, where in sorted(names.items()):
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            try:
                value: object = importlib.import_module(".".join(parts[:end]))
                break
            except ModuleNotFoundError:
                continue
        for attribute in parts[end:]:
            if not hasattr(value, attribute):
                missing.append(f"{where}: {name}")
                break
            value = getattr(value, attribute)
    assert not missing, "documents name what does not exist:\n" + "\n".join(missing)


def test_every_python_example_parses_and_names_what_exists() -> None:
    """The ```python blocks of README.md and docs/: each parses, each ``from slate_ops... import X``
    resolves, and ``module.name`` on an imported slate_ops module (``admin.create_db``) exists."""
    import ast
    import importlib
    import types

    problems_found: list[str] = []
    for document in DOCUMENTS:
        for index, block in enumerate(_python_blocks(document)):
            where = f"{document.relative_to(ROOT)} (python block {index + 1})"
            try:
                tree = ast.parse(block)
            except SyntaxError as error:
                problems_found.append(f"{where}: {error}")
                continue
            modules: dict[str, types.ModuleType] = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("slate_ops"):
                    module = importlib.import_module(node.module)
                    for alias in node.names:
                        if hasattr(module, alias.name):
                            value = getattr(module, alias.name)
                        else:
                            try:
                                value = importlib.import_module(f"{node.module}.{alias.name}")
                            except ModuleNotFoundError:
                                problems_found.append(f"{where}: from {node.module} import {alias.name}")
                                continue
                        if isinstance(value, types.ModuleType):
                            modules[alias.asname or alias.name] = value
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in modules
                    and not hasattr(modules[node.value.id], node.attr)
                ):
                    problems_found.append(f"{where}: {node.value.id}.{node.attr}")
    assert not problems_found, "examples that do not match the code:\n" + "\n".join(problems_found)
