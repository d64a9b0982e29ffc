"""The shape of the controllers (docs/controllers.md, "One shape for a reconcile pass"; issue 28): no module
named ``reconciler.py`` under ``arc_scaleset/controllers/`` over 450 lines, and no function or method there
over 50 lines. What grows past either goes into its own module as a pure plan or a phase. Declarative tables
are module-level assignments, not functions, so they are never counted.

A failure names every offender with its size, largest first.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import arc_scaleset.controllers

CONTROLLERS = Path(arc_scaleset.controllers.__file__).parent
MAX_RECONCILER_LINES = 450
MAX_FUNCTION_LINES = 50


@dataclass(frozen=True)
class FunctionSize:
    """One function or method: its qualified name in the module, its ``def`` line and its length in lines."""

    name: str
    line: int
    lines: int


def function_sizes(source: str) -> list[FunctionSize]:
    """Every function and method of ``source``, nested ones too (``Class.method.inner``), in source order.

    The length counts from the ``def`` line (decorators excluded) to the last line of the body, both included:
    the docstring and blank lines inside count, a nested function counts in its own length and in its
    enclosing function's.
    """
    found: list[FunctionSize] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                end = child.end_lineno if child.end_lineno is not None else child.lineno
                found.append(FunctionSize(name=name, line=child.lineno, lines=end - child.lineno + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def _modules() -> list[Path]:
    return sorted(CONTROLLERS.rglob("*.py"))


def _where(path: Path) -> str:
    return str(path.relative_to(CONTROLLERS.parent.parent))


def test_function_sizes_counts_from_the_def_line_to_the_end_of_the_body() -> None:
    source = '''
TABLE = {
    "a": 1,
    "b": 2,
}


@decorator
def three(x):
    """Doc."""
    return x


class Shell:
    async def method(self):

        def inner():
            pass

        return inner


    def one(self): return 1
'''

    sizes = function_sizes(source)

    assert sizes == [
        FunctionSize(name="three", line=9, lines=3),
        FunctionSize(name="Shell.method", line=15, lines=6),
        FunctionSize(name="Shell.method.inner", line=17, lines=2),
        FunctionSize(name="Shell.one", line=23, lines=1),
    ]


def test_no_reconciler_module_is_over_450_lines() -> None:
    sizes = {
        _where(path): len(path.read_text(encoding="utf-8").splitlines())
        for path in _modules()
        if path.name == "reconciler.py"
    }
    assert sizes, f"no reconciler.py found under {CONTROLLERS}"

    over = sorted(((lines, where) for where, lines in sizes.items() if lines > MAX_RECONCILER_LINES), reverse=True)
    assert not over, f"over {MAX_RECONCILER_LINES} lines: " + ", ".join(f"{where} ({n})" for n, where in over)


def test_no_function_in_the_controllers_is_over_50_lines() -> None:
    over = sorted(
        (
            (size.lines, f"{_where(path)}:{size.line} {size.name}")
            for path in _modules()
            for size in function_sizes(path.read_text(encoding="utf-8"))
            if size.lines > MAX_FUNCTION_LINES
        ),
        reverse=True,
    )

    assert not over, f"over {MAX_FUNCTION_LINES} lines: " + ", ".join(f"{where} ({n})" for n, where in over)
