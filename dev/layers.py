"""The import-layer contract: every arrow between durably's packages points down.

Run by `make lint` (and by a unit test). It reads every module's import statements (those
under ``TYPE_CHECKING`` too) and fails, naming each import, when:

- a module imports a layer its own may not (the table below);
- a module imports a private ``_module`` of another package.

`durably.stores.opening` imports a backing by name only when a DSN names it
(``importlib``), which is not an import statement and so not an arrow here.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

SHARED = {"errors", "clock", "validation", "redaction"}
BACKINGS = {"memory", "sqlite", "postgres", "redis"}

# What each layer may import, besides itself.
ALLOWED: dict[str, set[str]] = {
    "shared": {"shared"},
    "stores": {"shared"},
    "otel": {"shared", "stores"},
    "claimcheck": {"shared", "stores"},
    "backing": {"shared", "stores", "claimcheck"},
    "engine": {"shared", "stores", "otel"},
    "app": {"shared", "stores", "engine", "otel"},
    "testing": {"shared", "stores", "engine", "app", "claimcheck", "otel"},
    "top": {"shared", "stores", "engine", "app", "claimcheck", "otel"},
    "integration": {"shared", "stores", "engine", "app", "integration", "otel"},
    "dashboard": {"shared", "stores", "engine", "app", "otel"},
    "tools": {
        "shared",
        "stores",
        "engine",
        "app",
        "claimcheck",
        "backing",
        "testing",
        "top",
        "otel",
        "integration",
        "dashboard",
    },
}


def layer(module: str) -> tuple[str, str]:
    """The layer of a dotted durably module and the package that owns it."""
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else ""
    if head == "":
        return "top", "durably"
    if head in SHARED:
        return "shared", f"durably.{head}"
    if head in BACKINGS:
        return "backing", f"durably.{head}"
    if head in {"otel", "logging"}:  # observability: traces, metrics, log formats
        return "otel", f"durably.{head}"
    if head in {"stores", "claimcheck", "engine", "app", "testing"}:
        return head, f"durably.{head}"
    if head == "pydantic_ai":
        return "integration", f"durably.{head}"
    if head == "dashboard":  # a web UI over the App
        return "dashboard", "durably.dashboard"
    if head in {"cli", "demo", "__main__"}:
        return "tools", f"durably.{head}"
    raise SystemExit(f"{module}: no layer is known for durably.{head}; add it to dev/layers.py")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, module: str) -> list[tuple[int, str]]:
    """Every durably module ``path`` imports, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from durably.app import _layout` imports the module durably.app._layout
            found.append((node.lineno, base))
            found += [
                (node.lineno, f"{base}.{alias.name}")
                for alias in node.names
                if is_module(f"{base}.{alias.name}")
            ]
    return [(line, name) for line, name in found if name.split(".")[0] == "durably"]


def is_module(dotted: str) -> bool:
    where = SRC.joinpath(*dotted.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def private_of_another(importer: str, imported: str) -> bool:
    """Whether ``imported`` is a ``_module`` inside a package ``importer`` is not part of."""
    parts = imported.split(".")
    for index, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            owner = ".".join(parts[:index])
            return not (importer == owner or importer.startswith(owner + "."))
    return False


def violations() -> list[str]:
    problems: list[str] = []
    for path in sorted((SRC / "durably").rglob("*.py")):
        module = module_name(path)
        mine, package = layer(module)
        for line, imported in imports(path, module):
            theirs, their_package = layer(imported)
            where = f"{path.relative_to(SRC.parent)}:{line}"
            if their_package != package and theirs != mine and theirs not in ALLOWED[mine]:
                problems.append(f"{where}: the {mine} layer may not import {imported}")
            elif mine == theirs == "backing" and their_package != package:
                problems.append(f"{where}: a backing may not import another ({imported})")
            if private_of_another(module, imported):
                problems.append(f"{where}: {imported} is private to its package")
    return sorted(set(problems))


def main() -> int:
    problems = violations()
    for problem in problems:
        print(problem)
    print(f"import layers: {len(problems)} violation(s)" if problems else "import layers: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
