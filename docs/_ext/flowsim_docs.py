"""Griffe extension for the API reference (not part of the package).

1. ``flowsim`` re-exports its public names lazily (PEP 562 ``__getattr__`` over ``_EXPORTS``), which
   static analysis cannot see. Each entry of ``_EXPORTS`` becomes an alias member of the ``flowsim``
   module, so pages can write ``::: flowsim.solve`` and links can say ``flowsim.Dataset``.
2. The docstrings use reST roles. ``:math:`x``` becomes ``$x$`` (arithmatex, rendered by MathJax);
   ``:func:`` / ``:class:`` / ``:meth:`` / ``:mod:`` / ``:exc:`` / ``:attr:`` become links to the object's
   entry in the reference where it has one, plain code otherwise. A role naming ``flowsim.<...>`` that
   does not exist is a warning (so ``mkdocs build --strict`` fails on a broken reference). A reST
   ``text::`` before an indented block loses one colon (Markdown shows the block as code).
"""

from __future__ import annotations

import ast
import html
import logging
import re

import griffe

_log = logging.getLogger("mkdocs.plugins.flowsim_docs")

_MATH = re.compile(r":math:`([^`]+)`")
_LITERAL = re.compile(r"::[ \t]*\n([ \t]*\n)")  # reST "text::" + blank line: the indented block is code
_ROLE = re.compile(r":(?:py:)?(func|class|meth|mod|exc|attr|data|obj):`(~?)([^`<>]+?)`")


def _lookup(pkg: griffe.Module, path: str):
    """The object at the dotted ``path`` (starting with the package name), or None."""
    parts = path.split(".")
    if parts[0] != pkg.name:
        return None
    obj = pkg
    try:
        for part in parts[1:]:
            obj = obj.members[part]
            if obj.is_alias:
                obj = obj.final_target
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    return obj


def _resolve(pkg: griffe.Module, owner, target: str):
    """The object a role on ``owner``'s docstring names, or None."""
    target = target.lstrip(".")
    if target.startswith(pkg.name + "."):
        return _lookup(pkg, target)
    head, _, rest = target.partition(".")
    scope = owner
    while scope is not None:  # the owner, its class, its module, the package ...
        try:
            path = scope.resolve(head)
        except (griffe.NameResolutionError, KeyError, AttributeError):
            path = None
        if path:
            found = _lookup(pkg, path + ("." + rest if rest else ""))
            if found is not None:
                return found
        scope = scope.parent
    return None


class FlowsimDocs(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        if pkg.name != "flowsim":
            return
        self._add_exports(pkg)
        self._rewrite(pkg, pkg, set())

    @staticmethod
    def _add_exports(pkg: griffe.Module) -> None:
        exports = pkg.members.get("_EXPORTS")
        if exports is None or exports.value is None:
            _log.warning("flowsim_docs: flowsim._EXPORTS not found; the public names are not aliased")
            return
        for name, (module, attribute) in ast.literal_eval(str(exports.value)).items():
            target = module if attribute is None else f"{module}.{attribute}"
            if target == f"{pkg.path}.{name}":  # a submodule under its own name (flowsim.io): already a member
                continue
            if _lookup(pkg, target) is None:
                _log.warning("flowsim_docs: flowsim._EXPORTS[%r] names %s, which does not exist", name, target)
                continue
            pkg.set_member(name, griffe.Alias(name, target, parent=pkg))

    def _rewrite(self, pkg, obj, seen) -> None:
        if obj.is_alias or obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None:
            obj.docstring.value = self._convert(pkg, obj, obj.docstring.value)
        for member in list(obj.members.values()):
            self._rewrite(pkg, member, seen)

    @staticmethod
    def _convert(pkg, owner, text: str) -> str:
        text = _MATH.sub(lambda m: "$" + m.group(1).strip() + "$", text)
        text = _LITERAL.sub(lambda m: ":\n" + m.group(1), text)  # Markdown renders the indented block as code

        def link(m):
            kind, short, target = m.groups()
            shown = target.split(".")[-1] if short else target.lstrip(".")
            if kind in ("func", "meth"):
                shown += "()"
            found = _resolve(pkg, owner, target)
            code = f"<code>{html.escape(shown)}</code>"
            if found is None:
                if target.startswith(pkg.name + "."):
                    _log.warning("flowsim_docs: %s: the docstring names %s, which does not exist",
                                 owner.path, target)
                return code
            # optional: an object without an entry in the reference (a private module) stays plain code
            return f'<autoref identifier="{found.path}" optional>{code}</autoref>'

        return _ROLE.sub(link, text)
