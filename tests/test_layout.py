"""The house rules of `src/constrax/` (docs/layout.md), measured from the source's syntax
trees: no import circle between its modules, no module over 600 lines, and no function over
120 lines of code beyond a known list that must not grow.

The import graph has an edge from a module to every module of the package it imports,
at module level or inside a function (a deferred import is still a dependency), the
package's `__init__` included; `if TYPE_CHECKING:` imports count too. A function's lines of
code are the lines of its body without its signature, its docstring, blank lines and
comment-only lines (nested functions count in the function that holds them, and on their
own); this is the count of issue 45 (`from_mjcf` 202 before its split).
"""

import ast
import io
import pathlib
import tokenize

import pytest

_PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "constrax"
_MAX_MODULE_LINES = 600
_MAX_FUNCTION_LINES = 120

# Modules over 600 lines, each with its line count when it was listed. New entries are not
# allowed; an entry whose module shrinks below the limit may be dropped.
_LONG_MODULES: dict[str, int] = {}

# Functions over 120 lines of code, with their count when listed (same rule).
_LONG_FUNCTIONS: dict[str, int | None] = {}


def _modules() -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in sorted(_PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(_PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: pathlib.Path, modules) -> set[str]:
    """The modules of the package that module `name` imports (anywhere in its body)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            # `from . import x` imports the submodule `x` where there is one.
            targets = [
                f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan 1972)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _code_lines(source: str, node: ast.AST) -> int:
    """Lines of code of the body of `node`: from its first statement after the docstring
    (the signature and the docstring left out) to its end, without blank and comment-only
    lines."""
    body = node.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str) and len(body) > 1:
            body = body[1:]
    lines = set(range(body[0].lineno, node.end_lineno + 1))
    code = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in _NOT_CODE:
            continue
        code.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines & code)


_NOT_CODE = (
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
)


def _functions(path: pathlib.Path):
    """`(qualified name, lines of code)` of every function of a module."""
    source = path.read_text()
    tree = ast.parse(source)

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                yield name, _code_lines(source, child)
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def _grew(count: int, listed: int | None) -> bool:
    return listed is not None and count > listed


def _relative(path: pathlib.Path) -> str:
    return path.relative_to(_PACKAGE).as_posix()


def test_the_package_has_no_import_circle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle_of_three_and_a_deferred_import(tmp_path):
    """The measurement itself: a circle a -> b -> c -> a through a deferred import is
    found, a chain is not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    path = tmp_path / "b.py"
    path.write_text("def f():\n    from .a import g\n    return g\n")
    modules = {"pkg.a": None, "pkg.b": path}
    assert _imports("pkg.b", path, modules) == {"pkg.a"}


def test_no_module_passes_600_lines_beyond_the_known_list():
    long = {
        _relative(path): len(path.read_text().splitlines())
        for path in _modules().values()
        if len(path.read_text().splitlines()) > _MAX_MODULE_LINES
    }
    new = {k: v for k, v in long.items() if k not in _LONG_MODULES}
    grown = {k: v for k, v in long.items() if _grew(v, _LONG_MODULES.get(k))}
    assert new == {}, f"modules over {_MAX_MODULE_LINES} lines: {new}"
    assert grown == {}, f"listed modules that grew: {grown}"


def test_no_function_passes_120_lines_of_code_beyond_the_known_list():
    long = {}
    for path in _modules().values():
        for name, count in _functions(path):
            if count > _MAX_FUNCTION_LINES:
                long[f"{_relative(path)}:{name}"] = count
    new = {k: v for k, v in long.items() if k not in _LONG_FUNCTIONS}
    grown = {k: v for k, v in long.items() if _grew(v, _LONG_FUNCTIONS.get(k))}
    assert new == {}, f"functions over {_MAX_FUNCTION_LINES} lines of code: {new}"
    assert grown == {}, f"listed functions that grew: {grown}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('def f():\n    """Doc\n    string."""\n    # comment\n\n    return 1\n', 1),
        ("def f(\n    x,\n):\n    y = (\n        x\n    )\n    return y\n", 4),
    ],
)
def test_lines_of_code_leave_out_the_docstring_blank_lines_and_comments(source, expected):
    node = ast.parse(source).body[0]
    assert _code_lines(source, node) == expected


def test_the_rigid_subpackages_import_only_those_before_them():
    """`rigid/`: bodies and kinematics, then contacts, then trees (docs/layout.md)."""
    order = ["constrax.rigid._kinematics", "constrax.rigid._contact", "constrax.rigid._tree"]
    modules = _modules()
    late = []
    for name, path in modules.items():
        rank = next((i for i, sub in enumerate(order) if name.startswith(sub)), None)
        if rank is None:
            continue
        for target in _imports(name, path, modules):
            later = [sub for sub in order[rank + 1 :] if target.startswith(sub)]
            if later:
                late.append((name, target))
    assert late == []
