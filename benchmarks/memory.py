"""Peak memory of decoding a 10^6-row context, each candidate in a fresh process: verl-ctx against cloudpickle.

The parent writes each candidate's bytes to a file; a child process imports what it needs, notes its peak RSS,
reads the file, decodes, and reports its peak RSS again (``ru_maxrss``, which only grows). Candidates run in
turn, round after round (the order alternates), and the medians are reported.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .timing import table

TITLE = "Memory: decoding 10^6 rows (fresh processes, peak RSS)"
REPO = Path(__file__).resolve().parents[1]
TARGET = 0.85  # verl-ctx's peak RSS against cloudpickle's (issue #15)
CANDIDATES = {
    "verl-ctx (compiled)": "ours",
    "verl-ctx, compiled=False (pydantic path)": "plain",
    "cloudpickle of the instance (Ray today)": "pickle",
}


def peak_mib() -> float:
    """This process's peak RSS. VmHWM belongs to the process image, where ru_maxrss keeps the peak of the parent
    that forked it (a benchmark parent holding a large context would set every child's floor)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(kind: str, path: str) -> None:
    """Decode ``path`` as ``kind`` and print the peak RSS before and after (runs in a fresh process)."""
    import cloudpickle
    import msgspec

    from verl_ctx import decode

    from .models import IMPORTABLE, pydantic_path_models

    schema = pydantic_path_models()["Large"] if kind == "plain" else IMPORTABLE["Large"]
    before = peak_mib()
    data = Path(path).read_bytes()
    obj = cloudpickle.loads(data) if kind == "pickle" else decode(msgspec.msgpack.decode(data), schema)
    print(json.dumps({"before": before, "peak": peak_mib(), "rows": len(obj.rows)}))


def _write(directory: Path, rows: int) -> dict[str, Path]:
    import cloudpickle
    import msgspec

    from verl_ctx import encode

    from .models import IMPORTABLE, large_rows, pydantic_path_models

    data = {"rows": large_rows(rows)}
    ours = IMPORTABLE["Large"].model_validate(data)
    plain = pydantic_path_models()["Large"].model_validate(data)
    files = {"ours": directory / "ours.msgpack", "plain": directory / "plain.msgpack", "pickle": directory / "l.pkl"}
    files["ours"].write_bytes(msgspec.msgpack.encode(encode(ours)))  # the envelope, as Ray would carry it
    files["plain"].write_bytes(msgspec.msgpack.encode(encode(plain)))
    files["pickle"].write_bytes(cloudpickle.dumps(ours))
    return files


def run(quick: bool = False) -> tuple[str, dict[str, float]]:
    rows = 200_000 if quick else 1_000_000
    rounds = 1 if quick else 3
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    got: dict[str, list[dict[str, float]]] = {kind: [] for kind in CANDIDATES.values()}
    with tempfile.TemporaryDirectory() as tmp:
        files = _write(Path(tmp), rows)
        order = list(CANDIDATES.values())
        for r in range(rounds):
            for kind in order if r % 2 == 0 else reversed(order):
                out = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        f"from benchmarks.memory import child; child({kind!r}, {str(files[kind])!r})",
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                    cwd=REPO,
                    env=env,
                )
                got[kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
    peak = {kind: statistics.median(s["peak"] for s in samples) for kind, samples in got.items()}
    rows_out = []
    for name, kind in CANDIDATES.items():
        samples = got[kind]
        before = statistics.median(s["before"] for s in samples)
        ratio = peak[kind] / peak["pickle"]
        shown = f"{ratio:.3f}" + (f" (target ≤ {TARGET})" if kind == "ours" else "")
        rows_out.append(
            [
                name,
                f"{peak[kind]:.0f} MiB ({min(s['peak'] for s in samples):.0f}-{max(s['peak'] for s in samples):.0f})",
                f"{before:.0f} MiB",
                f"+{peak[kind] - before:.0f} MiB",
                f"**{shown}**" if kind == "ours" else shown,
            ]
        )
    text = table(
        ["decoding " + f"{rows:,} rows", "peak RSS (min-max)", "after imports", "decoding adds", "peak / cloudpickle"],
        rows_out,
    )
    note = (
        f"\n\nMedians of {rounds} fresh process(es) per candidate, run in turn. The input bytes are read in the "
        "process and count in its peak, as they would in a worker."
    )
    return text + note, {
        "memory_ratio": peak["ours"] / peak["pickle"],
        "memory_plain_ratio": peak["plain"] / peak["pickle"],
    }
