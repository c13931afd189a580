"""The Hydra entry point a launch goes through: verl's ``main_ppo`` or a recipe's own ``main_*.py``.

A recipe in the shape of verl's recipe collection is launched as ``python -m recipe.<name>.main_<name>
--config-path=config --config-name=<name>_trainer ...``. Hydra then composes its config from what the module's
``@hydra.main(config_path=..., config_name=...)`` says, with a relative path resolved against the *module's
folder* (Hydra's ``compute_search_path_dir`` for a ``python -m`` launch, where the task function's module is
``__main__`` and Hydra goes by its file). ``entry_point`` reads those arguments from the module's source with
``ast``, without importing it: a recipe's main module imports verl, torch and Ray, and validation must not.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..._driver.modules import from_working_directory
from ...errors import ConfigError

__all__ = ["VERL_ENTRY", "EntryPoint", "entry_point"]

#: verl's own entry point; the default of every command.
VERL_ENTRY = "verl.trainer.main_ppo"
_HYDRA_MAIN_ARGS = ("config_path", "config_name", "version_base")


@dataclass(frozen=True)
class EntryPoint:
    """A module with a ``@hydra.main`` function: where it is, and the config its decorator names."""

    module: str
    file: str
    config_path: str | None
    config_name: str | None
    #: The name of the ``@hydra.main`` function (the task function Hydra calls with the config).
    function: str = "main"
    #: The decorator's arguments that are computed, not literal: the command line must give them.
    computed: tuple[str, ...] = ()
    #: Whether the module starts a runner whose roles verl's rules decide (``KNOWN_RUNNER_NAMES``); else (an
    #: evaluation entry point, a runner of its own) which roles it starts is unknown.
    roles_known: bool = True

    def require(self, key: str, given: str | None) -> str | None:
        """The value Hydra uses for ``key``: the command line's, else the decorator's (refused if computed)."""
        if given is not None:
            return given
        if key in self.computed:
            raise ConfigError(
                f"-m {self.module}: @hydra.main's {key} in {self.file} is computed, not a literal string, so verl-ctx "
                f"cannot read it; pass --{key.replace('_', '-')} as the launch script would resolve it"
            )
        return getattr(self, key)  # type: ignore[no-any-return]

    @property
    def task_name(self) -> str:
        """What Hydra names the job (``detect_task_name`` for a file): the file's stem."""
        return Path(self.file).stem

    @property
    def folder(self) -> str:
        """Where a relative ``--config-path`` is resolved from (the real path, as Hydra takes it)."""
        return os.path.dirname(os.path.realpath(self.file))


def entry_point(module: str | None = None) -> EntryPoint:
    """The entry point ``python -m MODULE`` runs (verl's ``main_ppo`` when ``module`` is None), read, not imported."""
    name = module or VERL_ENTRY
    origin = _module_file(name)
    tree = parse_source(origin, f"-m {name}")
    function, config_path, config_name, computed = _hydra_main_arguments(tree, origin, name)
    return EntryPoint(name, origin, config_path, config_name, function, computed, _starts_known_runner(tree))


#: The largest source file read to find an entry point (recipe mains are kilobytes; a bigger file is not one, and
#: parsing hundreds of megabytes would cost minutes and gigabytes before anything was said).
MAX_SOURCE_BYTES = 4 * 1024 * 1024


def parse_source(path: str, what: str) -> ast.Module:
    """The syntax tree of the Python file at ``path``, read, never imported; ``ConfigError`` naming ``what`` when
    it is too big, unreadable, or does not parse (a syntax error, or nesting deeper than Python's parser allows)."""
    try:
        size = Path(path).stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise ConfigError(
                f"{what}: {path} is {size} bytes, over the {MAX_SOURCE_BYTES}-byte limit for a module verl-ctx reads "
                "to find its entry point; name the module that holds the @hydra.main function"
            )
        if sys.version_info < (3, 11) and _crashes_the_parser(path):
            raise RecursionError
        return ast.parse(Path(path).read_bytes(), filename=path)
    except (OSError, SyntaxError, ValueError, MemoryError) as e:
        raise ConfigError(f"{what}: cannot read {path} ({type(e).__name__}: {str(e).splitlines()[0]})") from None
    except RecursionError:
        raise ConfigError(f"{what}: cannot read {path} (nested too deeply for Python's parser)") from None


#: Names whose use means the module starts a runner that registers verl's roles by verl's rules: verl's runner
#: families and ``run_ppo`` (bound from outside), or ``bind_workers`` (a runner of any shape, binding itself).
KNOWN_RUNNER_NAMES = frozenset({"BaseTaskRunner", "TaskRunnerV1", "run_ppo", "bind_workers"})


def _crashes_the_parser(path: str) -> bool:
    """Whether parsing ``path`` kills the interpreter. Python 3.10's parser has no depth limit: a deep enough
    expression overflows the C stack (a segfault; 3.11 raises RecursionError). A throwaway interpreter tries first:
    tens of milliseconds, on 3.10 only."""
    probe = subprocess.run(
        [sys.executable, "-c", "import ast, sys; ast.parse(open(sys.argv[1], 'rb').read())", path],
        capture_output=True,
        timeout=120,
        check=False,
    )
    return probe.returncode < 0


def _starts_known_runner(tree: ast.Module) -> bool:
    """Whether the module's source uses one of ``KNOWN_RUNNER_NAMES`` (read, not imported; verl's own main does)."""
    for node in ast.walk(tree):
        name = (
            node.id
            if isinstance(node, ast.Name)
            else node.attr
            if isinstance(node, ast.Attribute)
            else next((a.name for a in node.names if a.name in KNOWN_RUNNER_NAMES), None)
            if isinstance(node, ast.ImportFrom)
            else None
        )
        if name in KNOWN_RUNNER_NAMES:
            return True
    return False


def _module_file(name: str) -> str:
    """The source file ``python -m name`` runs, found without importing its packages (verl's pulls torch)."""
    if not name or not all(part.isidentifier() for part in name.split(".")):
        raise ConfigError(f"-m {name!r}: expected a dotted module name, as `python -m` takes (recipe.dapo.main_dapo)")
    from_working_directory()
    top, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(top)  # a top-level lookup executes nothing
    except (ImportError, ValueError) as e:
        raise ConfigError(f"-m {name}: cannot find the module ({type(e).__name__}: {e})") from None
    found: Path | None = None
    if spec is not None:
        found = Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
        locations = [Path(p) for p in (spec.submodule_search_locations or [])]
        for part in rest:
            found = next((d / part / "__init__.py" for d in locations if (d / part / "__init__.py").is_file()), None)
            found = found or next((d / f"{part}.py" for d in locations if (d / f"{part}.py").is_file()), None)
            namespace = [d / part for d in locations if (d / part).is_dir()]
            locations = [found.parent] if found is not None and found.name == "__init__.py" else namespace
            if found is None and not namespace:
                break
        if found is not None and found.name == "__init__.py":  # `python -m package` runs its __main__
            found = found.with_name("__main__.py") if found.with_name("__main__.py").is_file() else None
    if found is None or not found.is_file():
        if name == VERL_ENTRY:
            raise ConfigError(
                "verl is not installed, so its ppo_trainer config cannot be composed. Install it with "
                "`pip install 'verl-ctx[verl]'`"
            )
        raise ConfigError(
            f"-m {name}: no such module (a Python source file) importable from the working directory "
            f"({os.getcwd()}) or the installed packages; run from the folder you would run `python -m` from"
        )
    return str(found)


def _hydra_main_arguments(
    tree: ast.Module, path: str, module: str
) -> tuple[str, str | None, str | None, tuple[str, ...]]:
    """The module's ``@hydra.main`` function (the one named ``main`` first), its ``config_path`` and
    ``config_name``, and which of the two are computed rather than literal."""
    module_names, main_names = _hydra_names(tree)
    found: list[tuple[str, ast.Call]] = []
    for node in tree.body:  # module-level functions: what `python -m` can run
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and _is_hydra_main(decorator.func, module_names, main_names):
                    found.append((node.name, decorator))
    if not found:
        raise ConfigError(
            f"-m {module}: {path} has no module-level function decorated with @hydra.main, so it is not an entry "
            "point whose config verl-ctx can compose. Name the module your launch script runs with `python -m`"
        )
    function, call = next(((n, c) for n, c in found if n == "main"), found[0])
    given: dict[str, ast.expr] = dict(zip(_HYDRA_MAIN_ARGS, call.args, strict=False))
    given.update({k.arg: k.value for k in call.keywords if k.arg is not None})
    values: dict[str, str | None] = {}
    computed = []
    for key in ("config_path", "config_name", "version_base"):
        expr = given.get(key)
        value: object = None if expr is None else expr.value if isinstance(expr, ast.Constant) else expr
        if value is not None and not isinstance(value, str):
            computed.append(key)
            value = None
        values[key] = value
    if "config_path" not in given and ("version_base" not in given or values["version_base"] == "1.1"):
        # Hydra's default for an unset config_path under the 1.1 behaviour an unset version_base selects: "."
        values["config_path"] = "."
    return function, values["config_path"], values["config_name"], tuple(k for k in computed if k != "version_base")


def _hydra_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names the module binds to the ``hydra`` package and to ``hydra.main`` itself."""
    modules: set[str] = set()
    mains: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):  # `import hydra`, `import hydra as h`, `import hydra.utils` (binds hydra)
            for alias in node.names:
                if alias.name == "hydra" or (alias.asname is None and alias.name.startswith("hydra.")):
                    modules.add(alias.asname or "hydra")
        elif isinstance(node, ast.ImportFrom) and node.module == "hydra":
            mains.update(alias.asname or alias.name for alias in node.names if alias.name == "main")
    return modules, mains


def _is_hydra_main(func: ast.expr, modules: set[str], mains: set[str]) -> bool:
    if isinstance(func, ast.Attribute) and func.attr == "main" and isinstance(func.value, ast.Name):
        return func.value.id in modules
    return isinstance(func, ast.Name) and func.id in mains
