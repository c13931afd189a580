"""The secret hunt (#23): every `verl-ctx` command, given secrets in every container shape a schema can hold them in,
from every source (Hydra override, config file, ``${oc.env:...}``), prints and writes none of them in any encoding.

One schema module holds ``SecretStr``, ``SecretBytes`` and ``pydantic.Secret[str]`` as a model field, in a stdlib
dataclass, a pydantic dataclass, a TypedDict, a list, a dict, a tuple, a deque and a model nested three deep (the
``Shapes`` model), once per source, in a worker-class role (critic) and a config-channel role (reward); each schema
also has a secret default. Each command runs as a user runs it (the console script, or ``python -m
verl_ctx.testing save-checkpoint``, in a subprocess), valid and invalid (a bad value next to the secrets, typos,
a secret in the wrong shape, an override Hydra cannot parse, an interpolation that fails), and its stdout, stderr
and every file it wrote (TMPDIR included) are hunted with ``tests.secret_hunt`` (plain, base64 at every alignment,
hex, msgpack, JSON-escaped, repr). ``config --resolve`` prints the config verl gets, prints and hands its trackers;
the rehearsal's own output, log and config dump are hunted in tests/integrations/test_recipe.py.

The commands run a few at a time (the module fixture) and each test checks what one printed and wrote. The hunt
found ``pydantic.Secret[str]`` values unsealed in checkpoints (in clear in contexts.json and history.jsonl, base64 in
envelopes.json, and in `diff` and the resume's report); they are sealed as SecretStr's are now, and hunted like
every other secret everywhere.
"""

from __future__ import annotations

import json
import os
import random
import string
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.secret_hunt import hunt, hunt_files

from .conftest import REPO, console_script

# A sweep of every command with every secret shape (30 commands, about a minute) with fixed inputs: run by `make
# test` only. `make campaigns` runs what a bigger budget changes, which here is nothing, and the compatibility cells
# (-m 'not sweep') leave it out, which CI's 90 minutes cannot afford.
pytestmark = pytest.mark.sweep

pytest.importorskip("hydra")

ROLES = ("critic", "reward")
SOURCES = ("override", "file", "env")
SHAPES = ("plain", "raw", "generic", "std", "pyd", "td", "listed", "mapped", "tupled", "queued", "nested")

SCHEMAS = """
    import collections
    import dataclasses

    import pydantic
    from pydantic import BaseModel, Field, SecretBytes, SecretStr
    from typing_extensions import TypedDict

    from verl_ctx import RoleContext


    @dataclasses.dataclass
    class StdHolder:
        key: SecretStr
        raw: SecretBytes | None = None


    @pydantic.dataclasses.dataclass
    class PydHolder:
        key: SecretStr
        generic: pydantic.Secret[str] | None = None


    class TdHolder(TypedDict):
        key: SecretStr
        n: int


    class Level3(BaseModel):
        key: SecretStr


    class Level2(BaseModel):
        below: Level3


    class Level1(BaseModel):
        below: Level2


    class Shapes(BaseModel):
        plain: SecretStr | None = None
        raw: SecretBytes | None = None
        generic: pydantic.Secret[str] | None = None
        std: StdHolder | None = None
        pyd: PydHolder | None = None
        td: TdHolder | None = None
        listed: list[SecretStr] = Field(default_factory=list)
        mapped: dict[str, SecretBytes] = Field(default_factory=dict)
        tupled: tuple[SecretStr, ...] = ()
        queued: collections.deque[SecretStr] = Field(default_factory=collections.deque)
        nested: Level1 | None = None
        extra: SecretStr | None = None
        count: int = 0


    class CriticContext(RoleContext, role="critic"):
        value_clip: float = Field(0.2, gt=0){critic_fields}
        preset: SecretStr = SecretStr({critic_default!r})
        override: Shapes = Field(default_factory=Shapes)
        file: Shapes = Field(default_factory=Shapes)
        env: Shapes = Field(default_factory=Shapes)


    class RewardContext(RoleContext, role="reward"):
        url: str = "http://judge"
        preset: pydantic.Secret[str] = pydantic.Secret[str]({reward_default!r})
        override: Shapes = Field(default_factory=Shapes)
        file: Shapes = Field(default_factory=Shapes)
        env: Shapes = Field(default_factory=Shapes)
"""


def _token(rng: random.Random, i: int) -> str:
    """A secret with the characters base64 and shells care about; every other one non-ASCII (JSON escapes it)."""
    body = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(20))
    return f"sk/{body[:10]}+{'é' if i % 2 else ''}={body[10:]}"


class Secrets:
    """Labelled secrets: ``label -> value``, each value new."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.values: dict[str, str] = {}

    def new(self, label: str) -> str:
        value = _token(self.rng, len(self.values))
        self.values[label] = value
        return value


def _shapes(put: Callable[[str], Any], keep: Callable[[str], bool]) -> dict[str, Any]:
    """The shapes of ``Shapes`` that ``keep`` keeps, each secret leaf ``put(its path)``."""
    build: dict[str, Callable[[], Any]] = {
        "plain": lambda: put("plain"),
        "raw": lambda: put("raw"),
        "generic": lambda: put("generic"),
        "std": lambda: {"key": put("std.key"), "raw": put("std.raw")},
        "pyd": lambda: {"key": put("pyd.key"), "generic": put("pyd.generic")},
        "td": lambda: {"key": put("td.key"), "n": 1},
        "listed": lambda: [put("listed[0]"), put("listed[1]")],
        "mapped": lambda: {"a": put("mapped.a"), "b": put("mapped.b")},
        "tupled": lambda: [put("tupled[0]"), put("tupled[1]")],
        "queued": lambda: [put("queued[0]"), put("queued[1]")],
        "nested": lambda: {"below": {"below": {"key": put("nested.below.below.key")}}},
    }
    assert tuple(build) == SHAPES
    return {shape: make() for shape, make in build.items() if keep(shape)}


def _hydra(value: Any) -> str:
    """``value`` in Hydra's override grammar, every string quoted (the tokens hold no ``'`` or ``\\``)."""
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list):
        return "[" + ",".join(_hydra(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_hydra(v)}" for k, v in value.items()) + "}"
    return str(value)


@dataclass
class Inputs:
    """One set of secrets: the overrides, the config file and the environment that give them."""

    overrides: list[str]
    config: str
    env: dict[str, str]


def _inputs(scratch: Path, name: str, secrets: Secrets, *, rotated: bool = False) -> Inputs:
    """Secrets in every role x source x shape; ``rotated``: in every role x shape, each shape from one source (the
    sources taking turns), for the commands that seal each secret (scrypt: some 50 ms a secret)."""
    section: dict[str, Any] = {}
    overrides: list[str] = []
    env: dict[str, str] = {}

    def given(role: str, source: str, keep: Callable[[str], bool]) -> dict[str, Any]:
        def put(path: str) -> str:
            value = secrets.new(f"{name}:{role}.{source}.{path}")
            if source != "env":
                return value
            var = f"VERL_CTX_HUNT_{name}_{len(env)}".upper()
            env[var] = value
            return f"${{oc.env:{var}}}"

        return _shapes(put, keep)

    for r, role in enumerate(ROLES):
        for s, source in enumerate(SOURCES):

            def keep(shape: str, r: int = r, s: int = s) -> bool:
                return not rotated or (SHAPES.index(shape) + r) % len(SOURCES) == s

            values = given(role, source, keep)
            if source == "override":
                overrides += [f"+extra_context.{role}.override.{shape}={_hydra(v)}" for shape, v in values.items()]
            else:
                section.setdefault(role, {})[source] = values
    config = f"train_{name}.yaml"
    (scratch / config).write_text(yaml.safe_dump({"extra_context": section}, allow_unicode=True, sort_keys=False))
    return Inputs(["algorithm.adv_estimator=gae", *overrides], config, env)


@dataclass(frozen=True)
class Case:
    """One command: its arguments (``@A``, ``@C``, ``@D``, ``@bad``, ``@grammar``, ``@interp``: those overrides;
    ``@tiny``: the stand-in model and data), the exit code it must give, text it must print (it did the work), the
    paths it writes, the folder it runs in (where its schema module is) and whether it is ``python -m
    verl_ctx.testing`` rather than the console script."""

    id: str
    args: tuple[str, ...]
    code: int
    says: str
    writes: tuple[str, ...] = ()
    cwd: str = "."
    module: bool = False


S = ("-s", "hunt_ctx")
A = (*S, "--config", "train_a.yaml", "@A")  # every role x source x shape
C = (*S, "--config", "train_c.yaml", "@C")  # every role x shape, the sources taking turns: the checkpoint's
D = (*S, "--config", "train_d.yaml", "@D")  # the same shapes, every secret changed
BAD = ("@bad",)
GRAMMAR = ("@grammar",)
INTERP = ("@interp",)
SAVE = ("save-checkpoint", "--step")
STEP1, STEP2 = "ckpt/global_step_1", "ckpt/global_step_2"

# Each inner tuple runs in order (a checkpoint before the diffs that read it); the tuples run side by side. Every
# command that composes a config costs a second or more (Hydra composes verl's whole config), so each command takes
# the variants whose output differs: its rendering of values (human, JSON), of invalid contexts, of usage errors.
CHAINS: tuple[tuple[Case, ...], ...] = (
    (
        Case("tiny-run", ("tiny-run", "tiny"), 0, "actor_rollout_ref.model.path=", ("tiny",), module=True),
        Case("run --check", ("run", "--check", *A, "@tiny"), 0, "verl's pre-launch checks passed"),
        Case(
            "run --check --format json, invalid", ("run", "--check", "--format", "json", *A, *BAD, "@tiny"), 1, "count"
        ),
        Case("run --check, unparseable override", ("run", "--check", *A, *GRAMMAR, "@tiny"), 2, "not shown"),
    ),
    (
        Case(
            "save-checkpoint", (*SAVE, "1", *C, "trainer.default_local_dir=ckpt"), 0, "saved ", ("ckpt",), module=True
        ),
        Case(
            "save-checkpoint, changed secrets",
            (*SAVE, "2", *D, "trainer.default_local_dir=ckpt"),
            1,
            "changed",
            (),
            module=True,
        ),
        Case(
            "save-checkpoint --accept-context-change",
            (*SAVE, "2", "--accept-context-change", *D, "trainer.default_local_dir=ckpt"),
            0,
            "saved ",
            ("ckpt",),
            module=True,
        ),
        Case("diff, same config", ("diff", STEP1, *C), 0, "same contexts"),
        Case("diff --format json, changed secrets", ("diff", STEP1, "--format", "json", *D), 1, '"secret changed"'),
        Case("diff --against", ("diff", STEP1, "--against", STEP2), 1, "secret changed"),
        Case(
            "diff --against --format json",
            ("diff", STEP1, "--against", STEP2, "--format", "json", *S),
            1,
            "secret changed",
        ),
        Case("diff, invalid", ("diff", STEP1, *C, *BAD), 1, "count"),
        Case(
            "save-checkpoint, invalid", (*SAVE, "3", *C, *BAD, "trainer.default_local_dir=bad"), 1, "count", module=True
        ),
    ),
    (
        Case("validate", ("validate", *A), 0, "contexts valid for 2 role(s)"),
        Case("validate, invalid", ("validate", *A, *BAD), 1, "input should be a valid integer"),
        Case("validate --format json, invalid", ("validate", "--format", "json", *A, *BAD), 1, '"valid": false'),
        Case("validate, unparseable override", ("validate", *A, *GRAMMAR), 2, "not shown"),
        Case(
            "validate --format json, failed interpolation",
            ("validate", "--format", "json", *A, *INTERP),
            2,
            "interpolation",
        ),
        Case("describe", ("describe", *A), 0, "**********"),
        Case("describe --format json", ("describe", "--format", "json", *A), 0, "**********"),
        Case("describe --format json, invalid", ("describe", "--format", "json", *A, *BAD), 1, '"errors"'),
    ),
    (
        Case("config --resolve", ("config", "--resolve", *A), 0, "**********"),
        Case("config, invalid", ("config", *A, *BAD), 1, "count"),
        Case("config --resolve, failed interpolation", ("config", "--resolve", *A, *INTERP), 2, "interpolation"),
        Case("schema export", ("schema", "export", *S, "-o", "exported"), 0, "exported", ("exported",)),
        Case("schema envelope", ("schema", "envelope", "-o", "envelope.json"), 0, "envelope.json", ("envelope.json",)),
        Case("schema check", ("schema", "check", "exported", *S), 0, "hunt_ctx"),
        Case("schema check --format json", ("schema", "check", "exported", "--format", "json", *S), 0, "hunt_ctx"),
        Case("schema check, breaking change", ("schema", "check", "../exported", *S), 1, "beta", (), cwd="v2"),
        Case(
            "schema check, a secret override given by mistake",
            ("schema", "check", "--format", "json", "exported", *S, "@A"),
            2,
            "<value withheld>",
        ),
    ),
)
CASES = {case.id: case for chain in CHAINS for case in chain}


@dataclass
class Ran:
    code: int
    out: bytes
    err: bytes
    seconds: float


@dataclass
class Hunt:
    scratch: Path
    secrets: dict[str, str]
    inputs: list[Path]
    ran: dict[str, Ran] = field(default_factory=dict)


@pytest.fixture(scope="module")
def hunted(tmp_path_factory: pytest.TempPathFactory) -> Hunt:
    """Every case run (the chains side by side), in one scratch directory; TMPDIR inside it, so temp files count."""
    scratch = tmp_path_factory.mktemp("hunt")
    secrets = Secrets(seed=23)
    for where, fields, version in ((scratch, "", "default"), (scratch / "v2", "\n    beta: float", "default v2")):
        where.mkdir(exist_ok=True)
        defaults = {f"{role}_default": secrets.new(f"{version}:{role}.preset") for role in ROLES}
        (where / "hunt_ctx.py").write_text(textwrap.dedent(SCHEMAS).format(critic_fields=fields, **defaults))
    a, c, d = (_inputs(scratch, name, secrets, rotated=name != "a") for name in "acd")

    def new(label: str) -> str:
        return _hydra(secrets.new(label))

    bad = [  # `++`: added or replaced, whichever source gave the section
        "++extra_context.critic.override.count=x",  # an invalid value next to the secrets
        f"++extra_context.reward.file.td={{key:{new('bad:reward.file.td.key')},n:x}}",  # ... inside the TypedDict
        f"++extra_context.critic.override.extra=[{new('bad:critic.override.extra[0]')}]",  # a secret, wrong shape
        f"++extra_context.reward.override.extra={{k:{new('bad:reward.override.extra.k')}}}",
        "++extra_context.reward.override.cuont=3",  # a typo in another key
        f"++extra_context.reward.override.plian={new('bad:reward.override.plian')}",  # a typo'd key holding a secret
        f"++extra_context.critic.env.nested={{below:{{below:{{key:{new('bad:critic.env.nested.key')},kye:x}}}}}}",
    ]
    grammar = [f"+extra_context.critic.override.extra={secrets.new('grammar:critic.override.extra')}"]  # unquoted
    interp = [f"+extra_context.reward.override.extra='{secrets.new('interp:reward.override.extra')}${{nowhere}}'"]
    from verl_ctx.testing import tiny_run_args

    tiny = tiny_run_args(scratch / "tiny" / "model", scratch / "tiny" / "data" / "train.parquet")
    expand = {"@A": a.overrides, "@C": c.overrides, "@D": d.overrides, "@bad": bad, "@grammar": grammar}
    expand |= {"@interp": interp, "@tiny": tiny}
    (scratch / "tmp").mkdir()
    inputs = [scratch / "hunt_ctx.py", scratch / "v2" / "hunt_ctx.py", *(scratch / i.config for i in (a, c, d))]
    state = Hunt(scratch, secrets.values, inputs)

    def run(case: Case) -> None:
        args = [word for arg in case.args for word in expand.get(arg, [arg])]
        command = [sys.executable, "-m", "verl_ctx.testing", *args] if case.module else [console_script(), *args]
        env = {
            **os.environ,
            **a.env,
            **c.env,
            **d.env,
            "PYTHONPATH": f"{scratch / case.cwd}{os.pathsep}{REPO}",
            "PYTHONDONTWRITEBYTECODE": "1",  # the schema module's .pyc would hold its secret defaults
            "TMPDIR": str(scratch / "tmp"),
            "NO_COLOR": "1",
            "HF_HUB_OFFLINE": "1",
        }
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=scratch / case.cwd, env=env, capture_output=True, timeout=300, check=False)
        state.ran[case.id] = Ran(proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - started)

    def run_chain(chain: tuple[Case, ...]) -> None:
        for case in chain:
            run(case)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=3) as pool:
        for done in [pool.submit(run_chain, chain) for chain in CHAINS]:
            done.result()
    took = {case: round(r.seconds, 1) for case, r in state.ran.items()}
    print(f"hunt: {len(took)} commands in {time.perf_counter() - started:.1f} s: {took}")
    return state


def _outputs(hunted: Hunt, case_id: str, secrets: dict[str, str]) -> list[str]:
    ran = hunted.ran[case_id]
    return hunt(ran.out, secrets, f"{case_id}: stdout") + hunt(ran.err, secrets, f"{case_id}: stderr")


@pytest.mark.parametrize("case_id", list(CASES))
def test_the_command_prints_and_writes_no_secret(hunted: Hunt, case_id: str) -> None:
    """The command did its work (its exit code and what it says), and no encoding of any secret is in its stdout,
    its stderr or a file it wrote."""
    case, ran = CASES[case_id], hunted.ran[case_id]
    said = (ran.out + ran.err).decode(errors="replace")
    assert ran.code == case.code, f"{case_id}: exit {ran.code}, expected {case.code}\n{said[-3000:]}"
    assert case.says in said, f"{case_id}: {case.says!r} not in\n{said[-3000:]}"
    found = _outputs(hunted, case_id, hunted.secrets)
    for written in case.writes:
        path = hunted.scratch / written
        assert path.exists(), written
        found += hunt_files(path, hunted.secrets)
    assert not found, "\n".join(found)


def test_no_file_anywhere_in_the_scratch_directory_holds_a_secret(hunted: Hunt) -> None:
    """Every file any command wrote (checkpoints, exports, temp files, logs; the inputs aside) is free of secrets."""
    written = sorted(p for p in hunted.scratch.rglob("*") if p.is_file() and p not in hunted.inputs)
    assert {"envelopes.json", "contexts.json", "history.jsonl"} <= {p.name for p in written}, written
    found = []
    for path in written:
        found += hunt(path.read_bytes(), hunted.secrets, str(path))
    assert not found, "\n".join(found)


def test_every_shape_from_every_source_reached_the_schema(hunted: Hunt) -> None:
    """Not a vacuous hunt: describe shows each role x source x shape given, redacted, from the source it came from."""
    rows = {row["path"]: row for row in json.loads(hunted.ran["describe --format json"].out)}
    origin = {"override": "command-line override", "file": "config file", "env": "config file"}
    for role in ROLES:
        for source in SOURCES:
            for shape in SHAPES:
                prefix = f"extra_context.{role}.{source}.{shape}"
                (row,) = [r for p, r in rows.items() if p == prefix or p.startswith(prefix + ".")]
                assert "**********" in json.dumps(row["value"]), row
                assert row["source"] == origin[source], row
        assert rows[f"extra_context.{role}.preset"]["source"] == "schema default"
