"""A system as plain data (JSON), so a saved run can be read back as a :class:`flowsim.Solution`.

Models, losses and flows are written as their formulas and parts: a model's beta and layer names, a
loss's expression, a flow's evaluation point and direction (each a class of :mod:`flowsim.points` /
:mod:`flowsim.directions` by name, with its fields). Formulas are text, read back by the whitelist parser
of :mod:`flowsim.symbolic.expression`: reading a spec names only those classes and functions, never runs
code. A system whose spec does not rebuild to an equal system (a part class of your own) has none: ``spec``
returns None and a saved run says so, rather than rebuilding something else.
"""

from __future__ import annotations

from dataclasses import fields

import sympy as sp

from flowsim.symbolic import directions, points
from flowsim.symbolic.derive import derive
from flowsim.symbolic.expression import ExpressionError, dump, load
from flowsim.symbolic.flow import Flow
from flowsim.symbolic.loss import Loss
from flowsim.symbolic.model import DiagonalNet, Parametrization


def spec(system) -> dict | None:
    """The system (its model, loss and flow) as JSON-able data, or None if it cannot be rebuilt."""
    try:
        out = {"model": _model(system.model), "loss": _loss(system.loss), "flow": _flow(system.flow)}
        same = parts_from_spec(out) == (system.model, system.loss, system.flow)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
    return out if same else None


def system_from_spec(data: dict):
    """The derived system a spec describes; a ValueError (an ExpressionError for a refused formula) if the
    spec is not one :func:`spec` writes."""
    try:
        parts = parts_from_spec(data)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"the saved system spec is not one flowsim writes ({type(e).__name__}: {e}).") from None
    return derive(*parts)


def parts_from_spec(data: dict):
    m, lo, f = data["model"], data["loss"], data["flow"]
    if "form" in m:
        model = DiagonalNet(m["depth"], m["form"])
    else:
        model = Parametrization(m["name"], tuple(m["layers"]), _expr(m["beta"]))
    loss = Loss(lo["name"], _expr(lo["expr"]), margin=_expr(lo["margin"]), log_expr=_expr(lo["log_expr"]),
                task=lo.get("task", "classification"))
    flow = Flow(_part(points, f["point"]), _part(directions, f["direction"]), rho=f["rho"], lr=f["lr"],
                decay=f["decay"], name=f["name"], shows=tuple(f["shows"]))
    return model, loss, flow


def _model(model):
    if isinstance(model, DiagonalNet):
        return {"depth": model.depth, "form": model.form}
    return {"name": model.name, "layers": list(model.layers), "beta": _text(model.beta)}


def _loss(loss):
    if loss.is_regression:  # used as written: no log form to keep
        return {"name": loss.name, "expr": _text(loss.expr), "margin": _text(loss.margin), "log_expr": None,
                "task": loss.task}
    return {"name": loss.name, "expr": _text(loss.expr), "margin": _text(loss.margin),
            "log_expr": _text(loss.log_expr)}


def _text(e):
    return None if e is None else dump(e)


def _expr(data):
    """An expression from what :func:`_text` wrote, through the whitelist parser (never evaluated)."""
    if data is None:
        return None
    try:
        return load(data)
    except ExpressionError as e:
        raise ValueError(f"a formula in the spec is refused: {e}") from None


def _flow(flow):
    return {"point": _part_data(flow.point), "direction": _part_data(flow.direction), "rho": flow.rho,
            "lr": flow.lr, "decay": flow.decay, "name": flow.name, "shows": list(flow.shows)}


def _part_data(part):
    values = {}
    for f in fields(part):
        v = getattr(part, f.name)
        if isinstance(v, sp.Basic):
            v = {"sympy": dump(v)}
        elif not isinstance(v, (int, float, str, bool, type(None))):
            raise TypeError(f"{type(part).__name__}.{f.name} is not plain data")
        values[f.name] = v
    return {"class": type(part).__name__, "fields": values}


def _part(module, data):
    cls = getattr(module, data["class"], None)
    if not (isinstance(cls, type) and cls.__module__ == module.__name__):
        raise ValueError(f"{data['class']!r} is not a part of {module.__name__}")
    values = {k: _expr(v["sympy"]) if isinstance(v, dict) else v for k, v in data["fields"].items()}
    return cls(**values)
