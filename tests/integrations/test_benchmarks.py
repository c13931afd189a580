"""The benchmark sections that break without a sound: run in their quick form so a broken one fails CI.

Only what the numbers come from is checked (each section runs to the end and writes its table); the numbers
themselves are for `make bench` on a quiet machine, never asserted in a test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import REPO


def test_startup_section_runs_on_verls_own_launch_scripts(tmp_path: Path) -> None:
    """`python -m benchmarks --quick --only startup`: validate on corpus launches against importing verl."""
    out = tmp_path / "RESULTS.md"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "startup", "--out", str(out)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    text = out.read_text()
    assert text.count("verl-ctx validate, verl's `") == 2  # one launch with its own --config-path, one without
    assert "python -c 'import verl.trainer.main_ppo'" in text


def test_codec_shapes_measure_what_their_rows_say() -> None:
    """The codec section's shapes (#24): each compiles, and its skewed worker schema differs from the driver's in
    the fingerprint only, so that the skew rows time the value-level receipt (a warning, every value kept), not an
    error or the same-schema path; a sample timed with the collector paused leaves it as it found it."""
    import gc

    import pytest
    from benchmarks.models import IMPORTABLE, SHAPES, instances, skewed_models
    from benchmarks.timing import interleaved

    from verl_ctx import decode, encode
    from verl_ctx._model.fingerprint import schema_info
    from verl_ctx._wire import compiled as compiled
    from verl_ctx.errors import SchemaSkewWarning

    skewed = skewed_models()
    for shape, obj in instances(IMPORTABLE, rows=1000).items():
        cls, worker = type(obj), skewed[SHAPES[shape]]
        assert compiled.why_not(cls) is None, shape
        ours, theirs = schema_info(cls), schema_info(worker)
        assert (ours.schema_id, ours.version) == (theirs.schema_id, theirs.version), shape
        assert ours.fingerprint != theirs.fingerprint, shape
        env = encode(obj)
        with pytest.warns(SchemaSkewWarning, match="decoded unchanged"):
            got = decode(env, worker)
        assert got.model_dump(exclude={"note"}) == decode(env, cls).model_dump() == obj.model_dump(), shape
    assert gc.isenabled()
    assert interleaved({"a": gc.isenabled}, number=1, rounds=1, paused={"a"})["a"].times
    assert gc.isenabled()
