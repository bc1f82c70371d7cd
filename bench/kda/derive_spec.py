#!/usr/bin/env python3
"""A copy of a spec whose baseline is another of its seeds, so that `ptxevo build` (which builds
the baseline seed's template with the baseline seed's knobs) builds that seed:

    python3 bench/kda/derive_spec.py kernels/kda/kda_fwd.spec kda_fwd_chunked_seed /tmp/kda_chunked.spec
    build/ptxevo build /tmp/kda_chunked.spec --knobs CHUNK=32,LM_TENSOR_CORES=0 --out /tmp/c32

The copy may live anywhere: every seed's `source` becomes an absolute path (the engine resolves a
relative one against the spec's folder). Only the [objective] baseline line and the source lines
change; the result is parsed back (tomllib) and checked.
"""

from __future__ import annotations

import os
import re
import sys
from typing import List, Optional

try:
    import tomllib
except ImportError:  # Python < 3.11: the check after writing is skipped
    tomllib = None  # type: ignore[assignment]

_TABLE = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-]+)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r'^(\s*)(baseline|source)(\s*=\s*)"([^"\\]*)"(\s*(#.*)?)$')


class SpecError(ValueError):
    pass


def derive(text: str, seed: str, spec_dir: str) -> str:
    """The spec text with [objective] baseline = seed (the section is added when missing) and
    every [[seed]] source absolute (relative ones resolved against spec_dir)."""
    out: List[str] = []
    table: Optional[str] = None
    saw_objective = saw_baseline = False
    seeds: List[str] = []
    for line in text.splitlines():
        m = _TABLE.match(line)
        if m:
            if table == "objective" and not saw_baseline:
                out.append(f'baseline = "{seed}"')
                saw_baseline = True
            table = m.group(1)
            saw_objective = saw_objective or table == "objective"
            out.append(line)
            continue
        k = _KEY.match(line)
        if k and table == "objective" and k.group(2) == "baseline":
            line = f'{k.group(1)}baseline{k.group(3)}"{seed}"{k.group(5)}'
            saw_baseline = True
        elif k and table == "seed" and k.group(2) == "source":
            src = k.group(4)
            path = src if os.path.isabs(src) else os.path.normpath(os.path.join(os.path.abspath(spec_dir), src))
            seeds.append(path)
            line = f'{k.group(1)}source{k.group(3)}"{path}"{k.group(5)}'
        out.append(line)
    if table == "objective" and not saw_baseline:
        out.append(f'baseline = "{seed}"')
        saw_baseline = True
    if not saw_objective:
        out += ["", "[objective]", f'baseline = "{seed}"']
    if not seeds:
        raise SpecError("no [[seed]] with a source line")
    return "\n".join(out) + "\n"


def check(text: str, seed: str) -> None:
    """The derived text parses, names `seed` as the baseline, and that seed exists with an
    absolute source that exists."""
    if tomllib is None:
        return
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"the derived spec does not parse: {e}")
    if doc.get("objective", {}).get("baseline") != seed:
        raise SpecError("the derived spec's baseline is not the seed")
    seeds = {s.get("name"): s for s in doc.get("seed", [])}
    if seed not in seeds:
        raise SpecError(f"no seed named '{seed}' (seeds: {sorted(n for n in seeds if n)})")
    for s in seeds.values():
        src = s.get("source", "")
        if not os.path.isabs(src) or not os.path.isfile(src):
            raise SpecError(f"seed {s.get('name')}: source '{src}' is not an existing absolute path")


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        print("usage: derive_spec.py SPEC SEED_NAME OUT_SPEC", file=sys.stderr)
        return 2
    spec, seed, out = argv
    try:
        with open(spec, encoding="utf-8") as f:
            text = derive(f.read(), seed, os.path.dirname(spec) or ".")
        check(text, seed)
    except (OSError, SpecError) as e:
        print(f"derive_spec.py: error: {e}", file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
