"""The files ``verl-ctx init NAME`` writes: a recipe skeleton that validates, rehearses and tests as written.

One context per chosen role (a field or two each, to rename), the worker classes that decode them, the reward
function that reads its context, a config section layered over verl's ``ppo_trainer``, the recipe's unit tests on
verl's real objects (``verl_ctx.testing``), and a README with the commands. Pure text: nothing is imported here.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence

from ..errors import ConfigError

__all__ = ["ROLES", "check_name", "check_roles", "commands", "files", "worker_flags"]

#: The roles a skeleton can hold, in the order its files list them.
ROLES = ("actor", "ref", "critic", "rollout", "reward")
_DEFAULT_ROLES = ("actor", "critic", "rollout", "reward")

_CLASS = {role: f"{role.capitalize()}Context" for role in ROLES}
_FIELDS = {
    "actor": '    entropy_bonus: float = Field(0.0, ge=0, description="Extra entropy coefficient in the loss.")',
    "ref": '    kl_temperature: float = Field(1.0, gt=0, description="Temperature of the KL term.")',
    "critic": '    value_clip: float = Field(0.2, gt=0, description="Clip range of the value loss.")',
    "rollout": (
        '    system_prompt: str = Field("You are a careful assistant.", description="Prepended by the agent loop.")\n'
        '    max_tool_calls: int = Field(4, ge=0, description="Tool calls an agent loop may make per sample.")'
    ),
    "reward": (
        '    length_penalty: float = Field(0.0, le=0, description="Added to the score per character of response.")\n'
        '    judge_url: str = Field("http://judge:8000", description="An LLM judge this recipe could call.")\n'
        "    # A secret: never in a file. Give it from the environment at launch:\n"
        "    #   'extra_context.reward.api_key=${oc.env:JUDGE_API_KEY}'\n"
        "    api_key: SecretStr | None = None"
    ),
}
_DOCS = {
    "actor": "What the actor's training worker reads beyond verl's own config.",
    "ref": "What the reference policy's worker reads.",
    "critic": "What the critic's training worker reads.",
    "rollout": "What the rollout side (its worker, an agent loop) reads.",
    "reward": "What the reward function reads.",
}
_VALUES = {
    "actor": "    entropy_bonus: 0.01",
    "ref": "    kl_temperature: 1.0",
    "critic": "    value_clip: 0.3",
    "rollout": "    max_tool_calls: 2",
    "reward": "    length_penalty: -0.001",
}


def check_name(name: str, directory: str) -> str:
    """``name`` if it can be the recipe's package (an identifier, not a keyword, no module it would shadow or be
    shadowed by: ``verl``, ``os``, an installed package), else a usage error."""
    import importlib.util
    import os

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ConfigError(f"init {name!r}: the recipe's name is its Python package; use letters, digits and _")
    if keyword.iskeyword(name):
        raise ConfigError(f"init {name!r}: {name} is a Python keyword, which cannot name a package; choose another")
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    here = os.path.realpath(os.path.join(directory, name))
    origin = spec.origin or next(iter(spec.submodule_search_locations or ()), None) if spec else None
    if spec is not None and not (origin and os.path.realpath(origin).startswith(here)):
        raise ConfigError(
            f"init {name!r}: a module named {name} exists already ({origin or 'built in'}); a recipe of that name "
            "would shadow it, or be shadowed by it, on every import. Choose another name"
        )
    return name


def check_roles(text: str | None) -> tuple[str, ...]:
    """The roles ``--roles`` names (comma-separated), in ``ROLES`` order; the default when not given."""
    if text is None:
        return _DEFAULT_ROLES
    given = [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in given if r not in ROLES]
    if unknown or not given:
        from .._model.field_errors import suggest

        close = [f"'{suggest(r, ROLES)}' for '{r}'" for r in unknown if suggest(r, ROLES)]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(f"--roles {text}: name one or more of {', '.join(ROLES)}, comma-separated{hint}")
    return tuple(r for r in ROLES if r in given)


def worker_flags(name: str, roles: Sequence[str]) -> list[str]:
    """The ``--worker`` options that make verl build the skeleton's worker classes."""
    flags = []
    if "critic" in roles:
        flags.append(f"critic={name}.workers:CriticWorker")
    if {"actor", "ref", "rollout"} & set(roles):
        flags.append(f"actor_rollout_ref={name}.workers:HybridWorker")
    return flags


def commands(name: str, roles: Sequence[str]) -> dict[str, str]:
    """The commands the README gives, by step; each runs from the folder that holds ``name/``."""
    base = f"-s {name}.contexts --config {name}/config.yaml"
    workers = "".join(f" --worker {flag}" for flag in worker_flags(name, roles))
    return {
        "validate": f"verl-ctx validate {base}",
        "test": f"python -m pytest -q {name}",
        "rehearse": f"verl-ctx run --rehearse {base}{workers} $(python -m verl_ctx.testing tiny-run .tiny)",
        "launch": f"verl-ctx run {base}{workers} ...the arguments you give verl's main_ppo...",
    }


def files(name: str, roles: Sequence[str]) -> dict[str, str]:
    """The skeleton's files, by path relative to the folder it is written in."""
    out = {
        f"{name}/__init__.py": f'"""The {name} recipe: typed contexts for verl\'s workers (verl-ctx)."""\n',
        f"{name}/contexts.py": _contexts(name, roles),
        f"{name}/config.yaml": _config(name, roles),
        f"{name}/test_{name}.py": _tests(name, roles),
        f"{name}/README.md": _readme(name, roles),
    }
    if worker_flags(name, roles):
        out[f"{name}/workers.py"] = _workers(name, roles)
    if "reward" in roles:
        out[f"{name}/reward.py"] = _reward(name)
    return out


def _contexts(name: str, roles: Sequence[str]) -> str:
    imports = "from pydantic import Field, SecretStr" if "reward" in roles else "from pydantic import Field"
    classes = "\n\n\n".join(
        f'class {_CLASS[r]}(RoleContext, role="{r}"):\n    """{_DOCS[r]}"""\n\n{_FIELDS[r]}' for r in roles
    )
    return f'''"""The typed contexts of {name}: one schema per role, checked before launch, decoded in each worker.

Checked against the config you launch with by::

    verl-ctx validate -s {name}.contexts --config {name}/config.yaml

Rename the fields, add your own; bump ``version=`` with a ``@migration`` when a change would break a checkpoint.
"""

from __future__ import annotations

{imports}
from verl_ctx import RoleContext


{classes}
'''


def _workers(name: str, roles: Sequence[str]) -> str:
    used = [r for r in ("actor", "ref", "critic", "rollout") if r in roles]
    parts = []
    for role, cls in (("critic", "CriticWorker"), ("actor", "ActorWorker"), ("ref", "RefWorker")):
        if role in roles:
            parts.append(
                f"class {cls}(TrainingWorker):\n"
                f'    """The {role}\'s training worker: its TrainingWorkerConfig carries the {role}\'s context."""\n\n'
                "    def __init__(self, config: TrainingWorkerConfig) -> None:\n"
                f"        self.ctx = decode(config, {_CLASS[role]})  # frozen, typed, the driver's values\n"
                "        super().__init__(config)"
            )
    if {"actor", "ref", "rollout"} & set(roles):
        body = ['    """verl\'s actor/rollout/ref worker with this recipe\'s inner workers and contexts."""', ""]
        if "actor" in roles:
            body.append("    actor_worker_cls = ActorWorker")
        if "ref" in roles:
            body.append("    ref_worker_cls = RefWorker")
        if "rollout" in roles:
            if body[-1]:
                body.append("")
            body += [
                "    def __init__(self, config: Any, role: str, **kwargs: Any) -> None:",
                "        super().__init__(config, role, **kwargs)",
                '        if "rollout" in self.role:  # actor_rollout_ref.rollout.custom carries it',
                "            self.rollout_ctx = decode(self.config, RolloutContext)",
            ]
        parts.append("class HybridWorker(ActorRolloutRefWorker):\n" + "\n".join(body).rstrip())
    flags = "\n    ".join(f"--worker {flag}" for flag in worker_flags(name, roles))
    contexts = ", ".join(sorted(_CLASS[r] for r in used))
    typing_import = "from typing import Any\n\n" if "rollout" in roles else ""
    training = bool({"actor", "ref", "critic"} & set(roles))
    hybrid = bool({"actor", "ref", "rollout"} & set(roles))
    engine = ", ".join(n for n, used in (("ActorRolloutRefWorker", hybrid), ("TrainingWorker", training)) if used)
    verl_imports = "\n".join(
        [
            *(["from verl.workers.config import TrainingWorkerConfig"] if training else []),
            f"from verl.workers.engine_workers import {engine}",
        ]
    )
    return (
        f'''"""{name}'s worker classes: each reads its role's typed context with one ``decode`` call.

These options of ``verl-ctx run`` make verl build them, bound to the contexts it validated::

    {flags}
"""

from __future__ import annotations

{typing_import}{verl_imports}
from verl_ctx import decode

from .contexts import {contexts}


'''
        + "\n\n\n".join(parts)
        + "\n"
    )


def _reward(name: str) -> str:
    return f'''"""{name}'s reward function (``reward.custom_reward_function`` in config.yaml). verl calls it with
``reward_kwargs``, where ``verl-ctx run`` puts the reward context; one ``decode`` line reads it."""

from __future__ import annotations

from typing import Any

from verl_ctx import decode

# verl loads this file by path, not as a module of a package: the import is absolute.
from {name}.contexts import RewardContext


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None, **kwargs: Any
) -> float:
    ctx = decode(kwargs, RewardContext)
    exact = 1.0 if solution_str.strip() == str(ground_truth).strip() else 0.0
    return exact + ctx.length_penalty * len(solution_str)
'''


def _config(name: str, roles: Sequence[str]) -> str:
    lines = [
        f"# {name}'s config, layered over verl's ppo_trainer: `verl-ctx ... --config {name}/config.yaml`. Any key",
        "# here overrides verl's; a context field is overridden on the command line with or without `+`.",
        f"# `verl-ctx schema export -s {name}.contexts -o schemas/` writes an editor schema for this file.",
    ]
    if "reward" in roles:
        lines += [
            "reward:",
            "  custom_reward_function:",
            f"    path: {name}/reward.py  # relative to the folder the run starts from",
            "    name: compute_score",
        ]
    if "ref" in roles:
        lines += ["actor_rollout_ref:", "  actor:", "    use_kl_loss: true  # the reference policy runs for this"]
    lines.append("extra_context:")
    for role in roles:
        lines += [f"  {role}:", _VALUES[role]]
    return "\n".join(lines) + "\n"


def _tests(name: str, roles: Sequence[str]) -> str:
    tests = []
    testing = set()
    if "critic" in roles:
        testing.add("bound_worker")
        tests.append('''def test_a_bound_critic_worker_carries_the_drivers_context() -> None:
    """The worker class `--worker critic=...` puts in verl's role mapping holds the context it was bound to."""
    worker = bound_worker(CriticWorker, CriticContext(value_clip=0.3))
    assert decode(worker, CriticContext).value_clip == 0.3''')
    if "actor" in roles:
        testing.add("worker_config")
        tests.append('''def test_the_actor_reads_its_context_from_verls_worker_config() -> None:
    """What ActorWorker.__init__ reads from the TrainingWorkerConfig verl hands it."""
    assert decode(worker_config(ActorContext(entropy_bonus=0.02)), ActorContext).entropy_bonus == 0.02''')
    if "rollout" in roles:
        testing.add("hydra_config")
        tests.append('''def test_the_rollout_side_reads_its_context_from_the_rollout_config() -> None:
    """An agent loop or the rollout worker is handed verl's rollout config."""
    config = hydra_config(RolloutContext(max_tool_calls=1))
    assert decode(config.actor_rollout_ref.rollout, RolloutContext).max_tool_calls == 1''')
    if "reward" in roles:
        testing.add("reward_kwargs")
        tests.append('''def test_the_reward_function_reads_its_context() -> None:
    """compute_score gets its context in reward_kwargs, as verl's reward loop passes it."""
    kwargs = reward_kwargs(RewardContext(length_penalty=-0.5))
    assert compute_score("data", "abc", "abc", **kwargs) == 1.0 - 0.5 * 3''')
    if "ref" in roles:
        testing.add("worker_config")
        tests.append("""def test_the_ref_worker_reads_its_context() -> None:
    assert decode(worker_config(RefContext(kl_temperature=0.5)), RefContext).kl_temperature == 0.5""")
    contexts = ", ".join(sorted(_CLASS[r] for r in roles))
    verl_ctx_imports = f"from verl_ctx.testing import {', '.join(sorted(testing))}"
    if set(roles) - {"reward"}:  # the reward test reads its context through the function itself
        verl_ctx_imports = "from verl_ctx import decode\n" + verl_ctx_imports
    local = []
    if "reward" in roles:
        local.append("from .reward import compute_score")
    if "critic" in roles:
        local.append("from .workers import CriticWorker")
    return (
        f'''"""{name}'s unit tests: its code reads its contexts from verl's real objects, no Ray.

``verl_ctx.testing`` builds what verl hands each piece of code at run time. Run them with::

    python -m pytest -q {name}
"""

from __future__ import annotations

{verl_ctx_imports}

{chr(10).join([f"from .contexts import {contexts}", *local])}


'''
        + "\n\n\n".join(tests)
        + "\n"
    )


def _readme(name: str, roles: Sequence[str]) -> str:
    steps = commands(name, roles)
    rows = [
        ("contexts.py", "one `RoleContext` per role"),
        ("config.yaml", "the `extra_context` section, layered over verl's config"),
    ]
    if worker_flags(name, roles):
        rows.append(("workers.py", "the worker classes verl builds, each decoding its role's context"))
    if "reward" in roles:
        rows.append(("reward.py", "the reward function, reading its context from `reward_kwargs`"))
    rows.append((f"test_{name}.py", "unit tests on verl's real objects, no Ray"))
    table = "\n".join(f"| `{file}` | {what} |" for file, what in rows)
    return f"""# {name}

A verl recipe with typed contexts for {", ".join(roles)}, written by `verl-ctx init`. Run every command from the
folder that holds `{name}/`.

| file | what it is |
|---|---|
{table}

```bash
{steps["validate"]}
{steps["test"]}
{steps["rehearse"]}
```

The last one runs the whole launch on this machine's CPUs, with a tiny model and dataset, up to the model engine,
and shows what each worker decoded. On the cluster, the launch is the same command without `--rehearse` and the
tiny run, with the arguments you give `python -m verl.trainer.main_ppo`:

```text
{steps["launch"]}
```
"""
