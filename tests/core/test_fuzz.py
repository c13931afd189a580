"""The fuzz campaign (``fuzz.py``) in CI: a fixed seed and a fresh one each run; only ContextErrors, fast."""

from __future__ import annotations

import random

import pytest

from ..budget import budget
from .fuzz import campaign, secret_campaign

SEEDS = [20261201, random.SystemRandom().randrange(2**32)]


@pytest.mark.parametrize("seed", SEEDS, ids=["fixed", "fresh"])
def test_envelopes_texts_references_slots_and_sections_raise_only_context_errors(seed: int) -> None:
    """20,000 inputs of five kinds: each decodes, validates or raises a ContextError, none takes over a CPU second."""
    report = campaign(20_000, seed)
    assert not report.defects, f"seed {seed}: " + "\n".join(report.defects[:5])
    assert report.worst_s < 1.0, f"seed {seed}: {report.worst_s:.2f} s for one {report.worst_kind} input"
    # Each kind both passes and fails sometimes: the campaign reaches past the first check.
    for kind in ("envelope", "text", "config section", "worker slot"):
        assert report.outcomes[f"{kind}: accepted"] > 0, kind
        assert sum(n for k, n in report.outcomes.items() if k.startswith(kind)) > report.outcomes[f"{kind}: accepted"]


@pytest.mark.parametrize("seed", SEEDS, ids=["fixed", "fresh"])
def test_secrets_in_every_shape_and_deep_any_values_round_trip_and_never_show(seed: int) -> None:
    """Contexts with secrets in stdlib and pydantic dataclasses, TypedDicts, `Secret[str]`, lists, maps, tuples,
    deques and models nested up to 80 deep, and `Any` values nested up to 600 deep: each encodes and decodes back
    equal (or is a ContextError), a mutated payload raises only ContextErrors, and no secret is in any repr, str or
    error, in clear or base64; none takes over a CPU second."""
    report = secret_campaign(budget(300, 20_000), seed)
    assert not report.defects, f"seed {seed}: " + "\n".join(report.defects[:5])
    assert report.worst_s < 1.0, f"seed {seed}: {report.worst_s:.2f} s for one {report.worst_kind} input"
    assert report.outcomes["deep Any: round trip"] > 0
    assert sum(n for k, n in report.outcomes.items() if k.startswith("secret shapes: mutated: ")) > 0
