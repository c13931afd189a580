"""`python -m benchmarks [--quick] [--only codec,memory,errors,startup,ray,scaling]`: the whole suite, one command.

Prints markdown tables and writes them to benchmarks/RESULTS.md. Numbers on shared machines are noisy:
compare the ratios (measured in the same run, interleaved), not the absolute times.

A section is a module ``benchmarks/<name>.py`` with ``run(quick) -> (markdown, figures)`` and a ``TITLE``. The
sections below run in this order; ``OPTIONAL`` ones run only when their module exists (``routing``: the
external LLM server routing overhead, which needs Ray and verl).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.util
import os
import platform
import sys
from pathlib import Path

import cloudpickle
import msgspec
import pydantic

SECTIONS = ("codec", "memory", "errors", "startup", "ray", "scaling")
OPTIONAL = ("routing",)
MODULES = {"ray": "ray_delivery"}  # section -> module, where the names differ
DEFAULT_TITLES = {"routing": "External LLM servers: routing overhead"}  # for a module without TITLE


def available() -> list[str]:
    """Every section this checkout can run, in order."""
    return [
        *SECTIONS,
        *(
            name
            for name in OPTIONAL
            if importlib.util.find_spec(f"{__package__}.{MODULES.get(name, name)}") is not None
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    sections = available()
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("--only", default=",".join(sections), help=f"comma-separated, of: {', '.join(sections)}")
    parser.add_argument("--out", default=str(Path(__file__).with_name("RESULTS.md")))
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in sections]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(sections)}")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    head = (
        f"# verl-ctx benchmarks\n\n`python -m benchmarks{' --quick' if args.quick else ''}` on "
        f"{dt.date.today()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; pydantic {pydantic.VERSION}, msgspec {msgspec.__version__}, "
        f"cloudpickle {cloudpickle.__version__}. Medians; ratios are within one run, candidates interleaved.\n"
    )
    parts = [head]
    print(head, flush=True)
    for name in chosen:
        module = importlib.import_module(f"{__package__}.{MODULES.get(name, name)}")
        text, _ = module.run(quick=args.quick)
        title = getattr(module, "TITLE", None) or DEFAULT_TITLES.get(name, name)
        block = f"## {title}\n\n{text}\n"
        print(block, flush=True)
        parts.append(block)
    Path(args.out).write_text("\n".join(parts))
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
