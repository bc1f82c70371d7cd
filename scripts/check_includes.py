#!/usr/bin/env python3
"""The layering of docs/architecture.md, checked on every #include "..." of the engine's sources.

Each top-level library may include only the libraries below it (LAYERS). Tests, benchmarks and
the CLI sit on top and may include anything. KNOWN_DEBT lists the edges that break a rule today,
each with why: a listed edge that the code no longer has fails the check too, so the list
shrinks as the debt is paid and never hides a new crossing.

SQL is written only in tracedb/: an engine source elsewhere (tests aside) that prepares or
executes a statement must be in SQL_DEBT, with why, and a listed file that no longer does fails.

Usage: scripts/check_includes.py [REPO]   (exit 1 and one line per crossing when a rule breaks)
"""
import pathlib
import re
import subprocess
import sys

# library -> the libraries it may include (besides itself).
LAYERS = {
    "ir": set(),                                   # the PTX IR: nothing of ours
    "agents": set(),                               # LLM clients, prompts, parsers: plain data in and out
    "evaluator": {"ir"},                           # spec, ops, builder, gate, runner
    "declared_ops": {"evaluator"},                 # operations declared in files
    "mutators": {"ir", "evaluator"},               # PTX passes and knob moves
    "kernels": {"evaluator", "declared_ops"},      # the built-in ops and their templates
    "tracedb": {"evaluator"},                      # the trace database: the only code that links SQLite
    "search": {"ir", "evaluator", "mutators", "agents", "tracedb"},
    "exporter": {"ir", "evaluator", "mutators", "search", "declared_ops", "tracedb"},
    "cluster": {"ir", "evaluator", "mutators", "search", "tracedb"},   # MPI ranks behind search's interfaces
    "report": {"evaluator", "search", "tracedb"},  # a campaign's report, read from its trace database
}
# Free to include anything: they wire or exercise the libraries.
TOP = {"cli", "bench", "tests", "examples", "scripts"}

# (file, included path) -> why the crossing is still there.
KNOWN_DEBT: dict = {}

# file -> why it still writes SQL outside tracedb/ (each a query to move behind TraceDb).
SQL_DEBT: dict = {}
SQL = re.compile(r'\b(prepare|exec)\(\s*"|#\s*include\s*<sqlite3\.h>')

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def library_of(path: str) -> str:
    return path.split("/", 1)[0]


def is_test_code(path: str) -> bool:
    return "/tests/" in path or path.startswith("tests/")


def main() -> int:
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    files = subprocess.check_output(
        ["git", "-C", str(repo), "ls-files", "*.cpp", "*.hpp", "*.h", "*.cu", "*.cuh"], text=True).split()
    libraries = set(LAYERS) | TOP
    unknown = sorted({library_of(f) for f in files if "/" in f} - libraries)
    problems = []
    if unknown:
        problems.append("check_includes: top-level folders with sources but no layer: " + ", ".join(unknown) +
                        " (add them to LAYERS or TOP in scripts/check_includes.py and to docs/architecture.md)")
    seen_debt = set()
    for f in files:
        lib = library_of(f)
        if lib not in LAYERS or is_test_code(f):
            continue
        for number, line in enumerate((repo / f).read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            dep = library_of(target)
            if dep == lib or dep not in libraries:
                continue  # its own headers, or a path relative to the file
            if dep in LAYERS[lib]:
                continue
            if (f, target) in KNOWN_DEBT:
                seen_debt.add((f, target))
                continue
            allowed = ", ".join(sorted(LAYERS[lib])) or "nothing of ours"
            problems.append(f"{f}:{number}: {lib} includes {target}, but {lib} may include only {allowed} "
                            "(docs/architecture.md)")
    seen_sql = set()
    for f in files:
        lib = library_of(f)
        if lib == "tracedb" or (lib not in LAYERS and lib != "cli") or is_test_code(f):
            continue
        text = (repo / f).read_text(errors="replace")
        if not SQL.search(text):
            continue
        if f in SQL_DEBT:
            seen_sql.add(f)
            continue
        problems.append(f"{f}: writes SQL outside tracedb/; add the query to tracedb/ (docs/architecture.md)")
    for f in sorted(set(SQL_DEBT) - seen_sql):
        problems.append(f"check_includes: {f} writes no SQL any more: remove it from SQL_DEBT")
    for f, target in sorted(set(KNOWN_DEBT) - seen_debt):
        problems.append(f"check_includes: the known debt {f} -> {target} is gone: remove it from KNOWN_DEBT")
    for p in problems:
        print(p)
    if not problems:
        print(f"check_includes: {len(files)} files, {len(LAYERS)} layered libraries, "
              f"{len(KNOWN_DEBT)} known crossings, {len(SQL_DEBT)} files still writing SQL outside tracedb/: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
