"""`python -m benchmarks [--quick] [--only codec,startup,ray,scaling]`: the whole suite, one command.

Prints markdown tables and writes them to benchmarks/RESULTS.md. Numbers on shared machines are noisy:
compare the ratios (measured in the same run), not the absolute times.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
from pathlib import Path

import cloudpickle
import msgspec
import pydantic

SECTIONS = ("codec", "startup", "ray", "scaling")
TITLES = {
    "codec": "Encode / decode, S / M / L contexts",
    "startup": "Start-up: import and pre-launch validation (fresh processes)",
    "ray": "Ray delivery (real verl RayWorkerGroup on CPU)",
    "scaling": "Scaling with table size",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--out", default=str(Path(__file__).with_name("RESULTS.md")))
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    from . import codec, ray_delivery, scaling, startup

    runners = {"codec": codec.run, "startup": startup.run, "ray": ray_delivery.run, "scaling": scaling.run}
    head = (
        f"# verl-ctx benchmarks\n\n`python -m benchmarks{' --quick' if args.quick else ''}` on "
        f"{dt.date.today()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; pydantic {pydantic.VERSION}, msgspec {msgspec.__version__}, "
        f"cloudpickle {cloudpickle.__version__}. Medians; ratios are within one run.\n"
    )
    parts = [head]
    print(head, flush=True)
    for name in [s.strip() for s in args.only.split(",") if s.strip()]:
        text, _ = runners[name](quick=args.quick)
        block = f"## {TITLES[name]}\n\n{text}\n"
        print(block, flush=True)
        parts.append(block)
    Path(args.out).write_text("\n".join(parts))
    print(f"written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
