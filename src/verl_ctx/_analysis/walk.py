"""The one walk over a pydantic core schema: its definitions, its children and the step to each, its classes.

pydantic validates with a core schema, a tree of dicts (``{"type": "model", "cls": ..., "schema": {...}}``).
verl-ctx reads that tree for these uses, each a visitor, a fold or a rewrite of this module's or a reader of its
helpers, never a traversal of its own:

* ``_secrets.plan``: where a value can hold a secret (a ``Visitor`` of ``walk``);
* ``kinds``: each field's wire kind (a ``Fold``, over the fields ``classes`` lists);
* ``trusted``: which validators the user declared (``classes``);
* ``_model.fingerprint``: the canonical form, each function as a digest (a ``Fold``);
* ``_wire.compiler``: the msgspec mirror and generated builders (a ``Fold``);
* ``_files.export``: which exported field holds a secret (through ``_secrets.plan.field_holds_secret``);
* ``trusted`` and ``_worker.limits``: a validator's schema with declared validators or containers changed (``rewrite``).

Three ways through the tree, for three jobs: ``walk`` visits (a finder: where is a secret?), ``Fold`` folds bottom-up
(a translation: each node to a canonical form, to a msgspec type), ``rewrite`` copies with nodes changed (a schema for
another validator). Each use says what it does at a node; how the tree is traversed is written here only.

The tree's rules, each written once here:

* ``default`` holds the user's value, never schema: a default ``{"type": "model", "ref": "x"}`` is a dict of data.
* A node is a mapping whose ``type`` names a kind (``is_node``); a model's fields and a tagged union's choices are
  mappings of the user's names, which may be ``type``, ``default`` or ``config``: every value of them is read.
  ``metadata``, ``serialization``, ``ref`` and ``config`` are no schema children either (the node's own readers
  take what they need from them).
* Definitions are collected once per root, the first of each ``ref`` kept; a ``definition-ref`` resolves through
  them, and ``walk`` follows a reference once per path (a recursive model is told to the visitor, not walked again).
* A plain union's choices may be ``(schema, label)`` pairs; a tagged union's are a tag -> schema mapping.
* The step to each child reads as paths do everywhere in verl-ctx: a field's name, ``[i]`` (a tuple's place),
  ``[*]`` (any item), ``{key}`` (a dict's keys), ``{*}`` (a dict's values), ``*`` (a model's extra fields).

Only pydantic-core's public schema shapes (``pydantic_core.core_schema``) are read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "DATA_KEYS",
    "FUNCTIONS",
    "Fold",
    "NOT_SCHEMA",
    "Visitor",
    "choices",
    "children",
    "classes",
    "definitions",
    "is_node",
    "join",
    "resolve",
    "rewrite",
    "walk",
]

#: Keys whose value is the user's data: never read as schema.
DATA_KEYS = frozenset({"default"})
#: Keys that are no schema child: data, documentation, the node's own serializer and settings, its name.
NOT_SCHEMA = DATA_KEYS | {"metadata", "serialization", "ref", "config"}
#: The validator wrappers around an inner schema.
FUNCTIONS = frozenset({"function-before", "function-after", "function-wrap"})
_ITEMS = frozenset({"list", "set", "frozenset", "deque", "generator"})

Node = Mapping[str, Any]


def is_node(item: Any) -> bool:
    """Whether ``item`` is a schema node (its ``type`` a kind's name), not a mapping of the user's names to nodes (a
    model's fields, a tagged union's choices), whose keys may be ``type``, ``default``, ``config`` or ``ref``."""
    return isinstance(item, Mapping) and isinstance(item.get("type"), str)


def definitions(root: Any) -> dict[str, Node]:
    """Every node of ``root`` that carries a ``ref``, by that ref (the first one met), defaults never read."""
    found: dict[str, Node] = {}
    stack = [root]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Mapping):
            ref = item.get("ref")
            if isinstance(ref, str) and item.get("type") != "definition-ref":
                found.setdefault(ref, item)
            skip = DATA_KEYS if is_node(item) else frozenset()
            stack.extend(v for k, v in item.items() if k not in skip and isinstance(v, (Mapping, list)))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, (Mapping, list)))
    return found


def resolve(node: Any, defs: Mapping[str, Node], *, defaults: bool = False) -> Any:
    """``node`` through ``definitions`` wrappers and references (and ``default`` wrappers with ``defaults``);
    ``None`` for a reference ``defs`` does not hold."""
    through = ("definition-ref", "definitions", "default") if defaults else ("definition-ref", "definitions")
    while isinstance(node, Mapping) and node.get("type") in through:
        node = defs.get(node.get("schema_ref", "")) if node["type"] == "definition-ref" else node.get("schema")
    return node


def choices(node: Node) -> list[Any]:
    """A union's member schemas: a plain union's (labels dropped) or a tagged union's (tags dropped)."""
    found = node.get("choices") or ()
    if isinstance(found, Mapping):
        return list(found.values())
    return [c[0] if isinstance(c, (tuple, list)) else c for c in found]


def join(path: str, step: str) -> str:
    """``path`` then ``step``: a name after a dot, brackets and braces directly, an empty step adds nothing."""
    if not step:
        return path
    if step[0] in "[{":
        return path + step
    return f"{path}.{step}" if path else step


def children(node: Node) -> Iterator[tuple[str, Any]]:
    """Each schema directly below ``node``, with the step that leads to it (``""`` through a wrapper)."""
    kind = node.get("type")
    if kind in ("model-fields", "typed-dict"):
        for name, field in (node.get("fields") or {}).items():
            yield str(name), field
        for extra in ("extras_schema", "extras_keys_schema"):
            if extra in node:
                yield "*", node[extra]
    elif kind == "dataclass-args":
        for field in node.get("fields") or ():
            yield str(field.get("name")), field
    elif kind in _ITEMS:
        if "items_schema" in node:
            yield "[*]", node["items_schema"]
    elif kind == "tuple":
        variadic = node.get("variadic_item_index")
        for i, item in enumerate(node.get("items_schema") or ()):
            yield ("[*]" if variadic is not None and i >= variadic else f"[{i}]"), item
    elif kind == "definitions":  # its definitions are reached where they are referenced
        if "schema" in node:
            yield "", node["schema"]
    elif kind == "dict":
        for key, step in (("keys_schema", "{key}"), ("values_schema", "{*}")):
            if key in node:
                yield step, node[key]
    else:
        yield from (("", child) for child in _below(node))


def _below(node: Node) -> Iterator[Any]:
    """Every schema in ``node``'s keys but ``NOT_SCHEMA``'s (a wrapper's inner schema, a union's choices, ...)."""
    for key, value in node.items():
        if key in NOT_SCHEMA:
            continue
        if isinstance(value, Mapping) and "type" in value:
            yield value
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, (tuple, list)) and item and isinstance(item[0], Mapping):
                    yield item[0]  # a labelled union choice
                elif isinstance(item, Mapping) and "type" in item:
                    yield item
        elif key == "choices" and isinstance(value, Mapping):  # a tagged union: tag -> schema
            yield from (v for v in value.values() if isinstance(v, Mapping))


class Visitor(Protocol):
    """What ``walk`` calls: ``enter`` at each node (``above``: the kinds of the nodes around it, outermost first;
    it returns whether to walk below), ``again`` where a reference leads back to a definition being walked."""

    def enter(self, node: Node, path: str, above: tuple[str, ...]) -> bool: ...

    def again(self, ref: str, path: str) -> None: ...


def walk(
    node: Any,
    visitor: Visitor,
    defs: Mapping[str, Node],
    path: str = "",
    above: tuple[str, ...] = (),
    refs: frozenset[str] = frozenset(),
) -> None:
    """Call ``visitor`` at every node below ``node``, each definition followed once per path (``refs``: the
    definitions being walked)."""
    if not isinstance(node, Mapping) or not visitor.enter(node, path, above):
        return
    kind = node.get("type")
    above = (*above, str(kind))
    if kind == "definitions":  # its definitions are walked where they are referenced
        walk(node.get("schema"), visitor, defs, path, above, refs)
    elif kind == "definition-ref":
        ref = node.get("schema_ref")
        if isinstance(ref, str) and ref in defs:
            if ref not in refs:
                walk(defs[ref], visitor, defs, path, above[:-1], refs | {ref})
            else:
                visitor.again(ref, path)
    else:
        for step, child in children(node):
            walk(child, visitor, defs, join(path, step), above, refs)


T = TypeVar("T")


class Fold(Generic[T]):
    """A schema folded bottom-up into a ``T`` by a subclass's ``visit``; how definitions are reached is kept here.

    ``fold(node, *context)`` passes ``definitions`` wrappers through, folds each definition once (a ``definition-ref``,
    or a node carrying a ``ref`` that ``shared`` says stands for its definition) and gives every later reference what
    ``reference`` made of it; a definition met again while it is being folded (a recursive model) goes to
    ``recursion``. What is no mapping (a list of choices, a plain value) goes to ``leaf``, any other mapping to
    ``visit``, which folds it and calls ``fold`` for what it reads below it: which keys are schema, and what each means,
    is the use's (a mapping of names, or of data, has no kind to dispatch on).
    """

    def __init__(self, root: Any) -> None:
        self.defs = definitions(root)
        self._folded: dict[str, T] = {}
        self._open: dict[str, int] = {}  # definitions being folded -> how many were open before each

    def fold(self, node: Any, *context: Any) -> T:
        if not isinstance(node, Mapping):
            return self.leaf(node, *context)
        kind = node.get("type")
        if kind == "definitions":
            return self.fold(node.get("schema"), *context)
        ref = node.get("schema_ref") if kind == "definition-ref" else node.get("ref")
        if isinstance(ref, str) and ref in self.defs and (kind == "definition-ref" or self.shared(*context)):
            return self._definition(ref, context)
        return self.visit(node, *context)

    def _definition(self, ref: str, context: tuple[Any, ...]) -> T:
        if ref in self._folded:
            return self._folded[ref]
        if ref in self._open:
            return self.recursion(ref, self._open[ref])
        self._open[ref] = len(self._open)
        try:
            done = self.reference(ref, self.visit(self.defs[ref], *self.inside(*context)))
        finally:
            del self._open[ref]
        self._folded[ref] = done
        return done

    def visit(self, node: Node, *context: Any) -> T:
        """One schema node, folded."""
        raise NotImplementedError

    def leaf(self, value: Any, *context: Any) -> T:
        """What is no schema node: a list, a plain value."""
        raise NotImplementedError

    def shared(self, *context: Any) -> bool:
        """Whether a node carrying its own ``ref`` is folded as that definition (once) here, not in place."""
        return True

    def inside(self, *context: Any) -> tuple[Any, ...]:
        """The context a definition is folded in, given the context of its first reference."""
        return context

    def reference(self, ref: str, folded: T) -> T:
        """What stands for a definition wherever it is referenced, given its fold."""
        return folded

    def recursion(self, ref: str, depth: int) -> T:
        """What stands for a definition referenced inside itself (``depth``: how many were open around it)."""
        raise NotImplementedError


def rewrite(
    node: Any, change: Callable[[Node, dict[str, Any]], dict[str, Any]], drop: frozenset[str] = frozenset()
) -> Any:
    """A copy of a schema with every node (``is_node``) passed through ``change(original, copy)``, inner nodes first.

    The keys in ``drop`` are left out of every node (and nothing below them is read); what is no schema (``NOT_SCHEMA``:
    a default is the user's value, a ``{"type": [...]}`` in it or in ``json_schema_extra``'s metadata no node) is kept
    as it is, and so are callables and classes: shared, not copied. A mapping of names (a model's fields) is copied
    with every value rewritten, whatever the names.
    """
    if isinstance(node, list):
        return [rewrite(v, change, drop) for v in node]
    if not isinstance(node, dict):
        return node
    if not is_node(node):
        return {k: rewrite(v, change, drop) for k, v in node.items()}
    copy = {k: v if k in NOT_SCHEMA else rewrite(v, change, drop) for k, v in node.items() if k not in drop}
    return change(node, copy)


def classes(root: Any, defs: Mapping[str, Node] | None = None) -> Iterator[tuple[type, dict[str, Any]]]:
    """Every model and dataclass in ``root`` (each once, references followed once), with its fields' schemas by
    name."""
    defs = definitions(root) if defs is None else defs
    seen: set[int] = set()
    refs: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, Mapping):
            continue
        if node.get("type") == "definition-ref":
            if node.get("schema_ref") not in refs:
                refs.add(node.get("schema_ref", ""))
                stack.append(defs.get(node.get("schema_ref", "")))
            continue
        skip = NOT_SCHEMA if is_node(node) else frozenset()
        stack.extend(v for k, v in node.items() if k not in skip)
        cls = node.get("cls")
        if node.get("type") in ("model", "dataclass") and isinstance(cls, type) and id(cls) not in seen:
            seen.add(id(cls))
            inner = resolve(node.get("schema"), defs, defaults=True)
            while isinstance(inner, Mapping) and inner.get("type") in FUNCTIONS:
                inner = resolve(inner.get("schema"), defs, defaults=True)
            fields = inner.get("fields") if isinstance(inner, Mapping) else None
            if isinstance(fields, Mapping):  # model-fields
                yield cls, {n: f.get("schema") for n, f in fields.items()}
            elif isinstance(fields, list):  # dataclass-args
                yield cls, {f["name"]: f.get("schema") for f in fields if isinstance(f, Mapping)}
