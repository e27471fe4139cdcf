"""flowsim's modules form floors: a module imports only from its own floor or lower ones, and no modules import
each other in a cycle. Every import counts, those inside functions too (one there had hidden a cycle)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "flowsim"

#: the floors, lowest first: a module belongs to the longest prefix named (``flowsim`` itself: the public API,
#: re-exporting the floors below it, only by its exact name)
FLOORS = (
    ("flowsim.errors", "flowsim._checks", "flowsim._interrupts", "flowsim._blas", "flowsim.progress", "flowsim._jax",
     "flowsim._files", "flowsim._variables", "flowsim.testing"),
    ("flowsim.symbolic",),  # models, losses, flows and the signs a model can reach: formulas, no data
    ("flowsim.data", "flowsim.datasets"),
    ("flowsim.field",),  # a System's compiled field and its Jacobian, on NumPy and JAX
    ("flowsim.symbolic.derive", "flowsim.symbolic.check", "flowsim.symbolic.spec"),  # a derived System, run on data
    ("flowsim.integrate",),
    ("flowsim.discrete", "flowsim.theory"),
    ("flowsim.plot",),
    ("flowsim.io",),
    ("flowsim",),
    ("flowsim.reproduce", "flowsim.demo"),
    ("flowsim.config", "flowsim.cli"),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imported_modules(name: str, source: str) -> set[tuple[str, int, str]]:
    """(module imported, line, the importing function or "module") for every flowsim import in ``source``,
    those inside functions included; ``from flowsim import io`` names the module flowsim.io."""
    package = name.split(".") if MODULES[name].name == "__init__.py" else name.split(".")[:-1]
    found = set()

    def visit(node, where):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            if isinstance(child, ast.Import):
                found.update((alias.name, child.lineno, where) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                above = package[: len(package) - child.level + 1] if child.level else []
                base = ".".join(above + ([child.module] if child.module else []))
                for alias in child.names:
                    whole = f"{base}.{alias.name}"
                    found.add((whole if whole in MODULES else base, child.lineno, where))
            visit(child, inner)

    visit(ast.parse(source), "module")
    return {(_known(target), line, where) for target, line, where in found if _known(target) not in (None, name)}


def _known(target: str):
    """The flowsim module ``target`` names (flowsim.io.save -> flowsim.io), None outside flowsim."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


IMPORTS = {name: imported_modules(name, path.read_text()) for name, path in MODULES.items()}


def floor(name: str) -> int:
    matches = [(len(prefix), level) for level, prefixes in enumerate(FLOORS) for prefix in prefixes
               if name == prefix or (prefix != "flowsim" and name.startswith(prefix + "."))]
    assert matches, f"{name} is on no floor: add it to FLOORS in {__file__}"
    return max(matches)[1]


def cycles(imports: dict) -> list[set]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in {target for target, _, _ in imports.get(v, ())}:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while not component or w != v:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
            if len(component) > 1:
                out.append(component)

    for v in sorted(imports):
        if v not in index:
            connect(v)
    return out


def test_the_import_reader_sees_imports_inside_functions():
    source = "import numpy\nfrom flowsim.data import Dataset\ndef f():\n    from flowsim import io\n    from . import _jax\n"
    assert imported_modules("flowsim.plot", source) == {("flowsim.data", 2, "module"), ("flowsim.io", 4, "f"),
                                                        ("flowsim._jax", 5, "f")}


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
    ring = {"a": {("b", 1, "f")}, "b": {("c", 1, "module")}, "c": {("a", 1, "module")}, "d": {("a", 1, "module")}}
    assert cycles(ring) == [{"a", "b", "c"}]


def test_every_module_is_on_a_floor():
    for name in MODULES:
        floor(name)


def test_no_module_imports_from_a_higher_floor():
    upward = sorted(f"{name} -> {target} (line {line}, in {where})" for name, targets in IMPORTS.items()
                    for target, line, where in targets
                    if floor(target) > floor(name))
    assert not upward, "imports from a higher floor:\n" + "\n".join(upward)


def test_no_import_cycle():
    found = [sorted(c) for c in cycles(IMPORTS)]
    assert not found, f"import cycles: {found}"


def test_only_the_reproduce_and_hunt_commands_import_the_report():
    """(``flowsim hunt`` runs the report's hunts; every other command starts without the report's imports.)"""
    users = {(name, where) for name, targets in IMPORTS.items() for target, _, where in targets
             if target.startswith("flowsim.reproduce") and not name.startswith("flowsim.reproduce")}
    assert users == {("flowsim.cli", "reproduce"), ("flowsim.cli", "hunt")}


def test_the_package_re_exports_only_from_floors_below_it():
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    (exports,) = [ast.literal_eval(node.value) for node in tree.body
                  if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["_EXPORTS"]]
    above = sorted({module for module, _ in exports.values() if floor(module) >= floor("flowsim")})
    assert not above, f"flowsim re-exports from modules on its floor or higher: {above}"


def assigned_attributes(source: str, owner: str) -> list[str]:
    """``owner.attr`` (or ``owner.attr[...]``) assigned anywhere in ``source``, augmented assignments too."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for leaf in ast.walk(target):
                while isinstance(leaf, ast.Subscript):
                    leaf = leaf.value
                if isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name) and leaf.value.id == owner:
                    found.add(f"{owner}.{leaf.attr} (line {node.lineno})")
    return sorted(found)


def test_the_attribute_finder_sees_tuple_subscript_and_augmented_targets():
    source = "run.a, x = 1, 2\nrun.stats['k'] += 1\nrun.b.c = 3\nx = run.d\n"
    assert assigned_attributes(source, "run") == ["run.a (line 1)", "run.b (line 3)", "run.stats (line 2)"]


def test_only_the_run_changes_its_own_state():
    """The segment-ending handlers move a solve on through the Run's methods (``end``, ``move_to``, ``pin``,
    ``hand_over``, ...), never by writing its attributes."""
    writes = {name: assigned_attributes(path.read_text(), "run") for name, path in MODULES.items()
              if name.startswith("flowsim.integrate")}
    assert not {name: found for name, found in writes.items() if found}


#: what sets a solve up (``flowsim.integrate.solve.set_up`` and the ``Problem`` it returns): a second caller of these
#: would be a second copy of the set-up, free to drift from solve's
SET_UP_PARTS = {"reduction", "clock_plan", "log_floor_of", "atol_for", "check_scales", "kept_entry_signs"}


def names_used(source: str) -> set[str]:
    """Every bare name and attribute name ``source`` reads or imports."""
    tree = ast.parse(source)
    return ({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
            | {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names})


def test_the_name_reader_sees_imports_calls_and_attributes():
    assert names_used("from m import reduction\nx = a.clock_plan(1)\ncheck_scales()\n") >= {
        "reduction", "clock_plan", "check_scales"}


def test_the_sweep_sets_its_points_up_as_solve_does():
    """The lockstep sweep takes each point's set-up from solve's (``set_up``: reduction, clock plan, floors, tolerances,
    kept signs); a check or reduction added there reaches both."""
    assert not names_used((PACKAGE / "integrate" / "sweep.py").read_text()) & SET_UP_PARTS
