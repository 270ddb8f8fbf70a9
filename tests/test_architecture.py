"""The import contract (docs/architecture.md): app's packages are layers, and an import only ever points
down; no two modules import each other, however indirectly; and an import inside a function body says
why in a comment on its line. Read from the source with ``ast``, nothing is imported."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1] / "app"
# Bottom to top. config (the settings) and i18n (the request's language) are read by every layer; main (the
# factory) and serve (the entry) sit on top.
LAYERS = ("config", "i18n", "maths", "lesson", "state", "serving", "view", "classroom", "web", "main", "serve")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted (app.web.pages)
    target: str  # the imported module of app, dotted
    line: int
    local: bool  # inside a function body
    commented: bool  # a comment on its line says why


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(root: Path) -> list[Import]:
    """Every import of one of app's modules by one of app's modules."""
    modules = {module_name(root, p) for p in root.rglob("*.py")}
    found = []
    for path in sorted(root.rglob("*.py")):
        source, text = module_name(root, path), path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text)
        local_nodes = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                       for n in ast.walk(f) if isinstance(n, ast.Import | ast.ImportFrom)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from app.web import pages` names a module; `from app.view.heatmap import legend` a name in one
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target in modules and target != source:
                    found.append(Import(source, target, node.lineno, id(node) in local_nodes,
                                        "#" in lines[node.lineno - 1]))
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "app"


def upward(found: list[Import]) -> list[str]:
    return [f"{i.source}:{i.line} imports {i.target} ({layer(i.source)} → {layer(i.target)})" for i in found
            if layer(i.source) in LAYERS and layer(i.target) in LAYERS
            and LAYERS.index(layer(i.target)) > LAYERS.index(layer(i.source))]


def cycles(found: list[Import]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for i in found:
        graph.setdefault(i.source, set()).add(i.target)
        graph.setdefault(i.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def test_every_module_lives_in_a_layer() -> None:
    top = sorted(p.stem for p in APP.glob("*.py") if p.stem != "__init__")
    assert top == ["config", "i18n", "main", "serve"]  # the settings, the language, the factory and the entry
    assert sorted(p.name for p in APP.iterdir() if p.is_dir() and p.name not in ("__pycache__", "locales")) == sorted(
        set(LAYERS) - {"config", "i18n", "main", "serve"})


def test_imports_point_down_only() -> None:
    assert upward(imports(APP)) == []


def test_no_module_imports_itself_through_others() -> None:
    assert cycles(imports(APP)) == []


def test_an_import_inside_a_function_says_why() -> None:
    silent = [f"{i.source}:{i.line} imports {i.target}" for i in imports(APP) if i.local and not i.commented]
    assert silent == []


def routers(root: Path) -> set[str]:
    """The modules that hold routes: a module-level ``router = APIRouter(…)``."""
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "router" for t in node.targets)
                    and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "APIRouter"):
                found.add(module_name(root, path))
    return found


def router_to_router(root: Path) -> list[str]:
    held = routers(root)
    return sorted(f"{i.source}:{i.line} imports {i.target}" for i in imports(root)
                  if i.source in held and i.target in held)


def test_no_router_imports_another_router() -> None:
    """A route's module imports what it serves from modules that hold no routes (app.web.api_answers,
    decoder_work, model_work, class_pages), never another router: each router is read on its own."""
    assert len(routers(APP)) >= 15
    assert router_to_router(APP) == []


def test_a_router_importing_a_router_is_caught(house: Path) -> None:
    (house / "web" / "pages.py").write_text("from fastapi import APIRouter\nrouter = APIRouter()\n")
    (house / "web" / "api.py").write_text("from fastapi import APIRouter\nfrom app.web import pages\n"
                                          "router = APIRouter()\n")
    assert router_to_router(house) == ["app.web.api:2 imports app.web.pages"]


def test_every_real_page_a_room_can_show_has_its_following_page() -> None:
    """app.web.classroom reaches a real model's class page through app.web.class_pages, which each class module
    fills as it is imported: once the app is made, every page a room's state can name is there."""
    from app.classroom.lesson import REAL_PAGES  # imported here: the rest of this file reads source only
    from app.main import create_app  # the app's making imports every router
    from app.web.class_pages import FOLLOWING

    create_app()
    assert set(FOLLOWING) == set(REAL_PAGES)


def test_no_module_of_app_is_much_over_400_lines() -> None:
    """A module a newcomer can read in one sitting: about 400 lines, never more than 450."""
    long = {module_name(APP, p): n for p in APP.rglob("*.py") if (n := len(p.read_text().splitlines())) > 450}
    assert long == {}

# --- the checks themselves fail on a house that breaks the contract ------------------------------


@pytest.fixture
def house(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    for package in ("maths", "view", "web"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "maths" / "attention.py").write_text("import numpy as np\n")
    (root / "view" / "heatmap.py").write_text("from app.maths.attention import np\n")
    (root / "web" / "pages.py").write_text("from app.view import heatmap\n")
    return root


def test_the_contract_holds_for_a_house_that_keeps_it(house: Path) -> None:
    found = imports(house)
    assert {(i.source, i.target) for i in found} == {("app.view.heatmap", "app.maths.attention"),
                                                    ("app.web.pages", "app.view.heatmap")}
    assert upward(found) == [] and cycles(found) == []


def test_an_upward_import_is_caught(house: Path) -> None:
    (house / "maths" / "attention.py").write_text("import numpy as np\nfrom app.view.heatmap import legend\n")
    assert upward(imports(house)) == ["app.maths.attention:2 imports app.view.heatmap (maths → view)"]


def test_a_cycle_and_a_silent_local_import_are_caught(house: Path) -> None:
    (house / "web" / "api.py").write_text("from app.web import pages\n")
    (house / "web" / "pages.py").write_text("def f():\n    from app.web import api\n")
    found = imports(house)
    assert cycles(found) == [["app.web.api", "app.web.pages"]]
    assert [(i.source, i.local, i.commented) for i in found if i.source == "app.web.pages"] == [
        ("app.web.pages", True, False)]


def documented_modules(text: str) -> set[str]:
    """The modules docs/architecture.md's index lists: under a heading **`app/<package>/`**, each line
    "- `name.py` — …"; and the top's "- `app/<name>.py` — …"."""
    listed, package = set(), None
    for line in text.splitlines():
        if line.startswith("**`app/") and line.rstrip().endswith("`**"):
            package = line.strip("*`").rstrip("/")
        elif line.startswith("- `app/") and "`" in line[3:]:
            listed.add(line[3 : line.index("`", 3)])
            package = None
        elif package and line.startswith("- `") and ".py`" in line:
            listed.add(f"{package}/{line[3 : line.index('`', 3)]}")
    return listed


def test_the_architecture_page_lists_every_module() -> None:
    """Every module of app (a package's __init__.py of a docstring aside) has its line in docs/architecture.md's
    index, under its package, and the index names no module that is gone."""
    doc = (APP.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    modules = {str(p.relative_to(APP.parent)) for p in APP.rglob("*.py")
               if p.name != "__init__.py" or len(p.read_text(encoding="utf-8").splitlines()) > 3}
    listed = documented_modules(doc)
    assert not modules - listed, f"docs/architecture.md does not list: {sorted(modules - listed)}"
    assert not listed - modules, f"docs/architecture.md lists modules that are gone: {sorted(listed - modules)}"
