"""Data sets: binary classification (labels +-1, with the separability check) and regression (real targets)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import optimize
from scipy.linalg import cho_factor, cho_solve
from scipy.linalg.blas import dsyrk
from scipy.special import expit, log_expit

from flowsim._blas import ONE_BLAS_THREAD
from flowsim._checks import refuse_masked
from flowsim.errors import NonSeparableError
from flowsim.symbolic.flows import GD
from flowsim.symbolic.model import Parametrization
from flowsim.symbolic.reachable import reachable_signs

#: a certificate's margins must exceed the worst-case rounding of a d-term dot product
#: (Higham's gamma_d, plus the rounding of the normalisation), relative to sum_j |z_ij beta_j|
_UNIT = 2.0**-53


#: what a Dataset holds (``Dataset.task``)
TASKS = ("classification", "regression")


@dataclass(frozen=True, eq=False)
class Dataset:
    r"""Samples ``X`` (n, d) with labels ``y`` in {+1, -1} (classification) or real targets ``y`` (regression).

    ``task``: ``"classification"`` or ``"regression"``; left out, it is inferred from ``y``: labels that are all
    +1 or -1 are classification (``Dataset(X)`` too: every label +1), three or more distinct values regression,
    and other two-valued y (0/1, 1/2) are refused as ambiguous (labels of two classes, or targets?).
    Real targets that happen to be all +-1 are regression only with ``task="regression"`` (a square-loss solve on
    inferred labels says so).

    Classification: ``z = y[:, None] * X`` holds the signed samples :math:`z_i = y_i x_i`; margins are
    :math:`m = Z \beta`. ``is_separable``: some beta has :math:`Z\beta > 0` (separable through the
    origin); :meth:`is_separable_by` asks the same of the betas a model can reach.

    Regression: ``z = [X, -y]`` (n, d + 1), the samples in homogeneous form, so that the margins a loss reads are
    the residuals :math:`m = z\,[\beta; 1] = X\beta - y` (docs/theory.md 12).
    """

    X: np.ndarray
    y: np.ndarray
    task: str = "classification"
    z: np.ndarray = field(init=False, repr=False)

    def __init__(self, X, y=None, task=None):
        if _is_complex(X) or _is_complex(y):
            raise ValueError("X and y must be real; got complex values (take .real or abs() first if that is meant).")
        if task is not None and task not in TASKS:
            raise ValueError(f"task must be one of {TASKS} (or None: inferred from y); got {task!r}.")
        X = _floats("X", X)  # a copy: editing the caller's array later must not change data.X
        one_row = X.ndim == 1
        if one_row:  # one sample, written as a vector
            X = X[None, :]
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            got = "an empty X" if X.size == 0 else f"shape {X.shape}"  # ([] read as one row of no features: (1, 0))
            raise ValueError(f"X must be a non-empty 2-D array of shape (n_samples, n_features); got {got}.")
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or inf; clean or drop those samples before building a Dataset.")
        if y is None and task == "regression":
            raise ValueError("task='regression' needs the targets y (one real number per row of X).")
        y = np.ones(X.shape[0]) if y is None else _floats("y", y).reshape(-1)
        if y.shape != (X.shape[0],):
            hint = (" (X was 1-D, taken as one sample of d features; for n samples of one feature pass "
                    "X[:, None])") if one_row else ""
            raise ValueError(f"y must have one label per row of X: X has {X.shape[0]} rows, y has shape {y.shape}"
                             f"{hint}.")
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or inf; labels must be +1 or -1 and regression targets finite real "
                             "numbers: drop or impute those samples.")
        task = _task_of(y) if task is None else task
        if task == "classification" and not np.all(np.isin(y, (-1.0, 1.0))):
            bad = np.unique(y[~np.isin(y, (-1.0, 1.0))])[:5]
            hint = " For 0/1 labels pass y = 2*y - 1." if set(np.unique(y)) <= {0.0, 1.0} else \
                " For real targets pass task='regression'."
            raise ValueError(f"y must contain only +1 and -1; found {bad.tolist()}.{hint}")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "task", task)
        object.__setattr__(self, "z", y[:, None] * X if task == "classification" else np.c_[X, -y])

    @property
    def is_regression(self) -> bool:
        return self.task == "regression"

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    @property
    def is_separable(self) -> bool:
        self._classification_only("is_separable")
        known = self.__dict__.get("_is_separable")  # (``separable_with`` remembers it too; this skips its key)
        if known is None:
            known = self.__dict__["_is_separable"] = self.separable_with(np.full(self.d, np.nan))
        return known

    def _classification_only(self, what):
        if self.is_regression:
            raise ValueError(f"{what} asks about labels +-1; these data are a regression (real targets): "
                             "build Dataset(X, y) with labels +1/-1 to ask it.")

    def is_separable_by(self, model, init, flow=None) -> bool:
        """Whether some beta that ``model`` can reach from ``init`` under ``flow`` (default GD)
        separates the data: the sign pattern of beta is restricted (:func:`flowsim.reachable_signs`;
        a balanced product or tied network of even depth from a positive init keeps beta >= 0; a model
        of your own: the signs derived from its formula)."""
        if not isinstance(model, Parametrization):
            raise ValueError(f"model must be a flowsim.Parametrization (DiagonalNet, Linear() or your own); "
                             f"got {model!r}.")
        signs = reachable_signs(model, model.init_params(init, self.d), GD() if flow is None else flow)
        return self.separable_with(signs)

    def flipped(self, columns) -> Dataset:
        """These data with column j of X multiplied by ``columns[j]`` (+-1), of the same task."""
        return Dataset(self.X * columns, self.y, self.task)

    def separable_with(self, signs) -> bool:
        """:func:`separable` of these data with the sign restriction ``signs``, remembered per
        restriction (``flowsim.solve`` asks it on every call: an L-BFGS-B run of ~0.5 ms at 20 x 10, seconds
        at 10,000 x 1,000). Data no beta separates are not separated by a restricted one either: once known,
        that is not asked again."""
        self._classification_only("separable_with")
        signs = np.asarray(signs, float)
        key = signs.tobytes()
        known = self.__dict__.setdefault("_separable_with", {})  # frozen: not a field
        if key not in known:
            unrestricted = known.get(np.full(self.d, np.nan).tobytes())
            known[key] = False if unrestricted is False else separable(self.z, signs)
        return known[key]

    def __repr__(self) -> str:
        return f"Dataset(n={self.n}, d={self.d}" + (", task='regression')" if self.is_regression else ")")


def require_separable(data: Dataset, allow_nonseparable: bool) -> None:
    """The refusal :func:`flowsim.solve`, :func:`flowsim.sweep` and :func:`flowsim.iterate` share:
    no max-margin limit exists on non-separable data unless the caller asks to run anyway (a regression has none
    to ask: it converges to a point)."""
    if not allow_nonseparable and not data.is_regression and not data.is_separable:
        raise NonSeparableError(
            "data are not linearly separable (the LP Z beta >= 1 is infeasible), so there is no max-margin "
            "limit; pass allow_nonseparable=True (in a config file: allow_nonseparable = true) to run anyway."
        )


def separable(z, signs=None) -> bool:
    r"""Some beta with z beta > 0 and beta_j of sign ``signs[j]`` (+1: >= 0, -1: <= 0, 0: = 0, nan: free).

    Scale-invariant: columns are scaled to max 1 and rows to norm 1 first (neither changes the
    answer). A certificate decides either way, both found by minimising the logistic loss over the
    allowed betas (L-BFGS-B, then Newton steps; n = 10,000, d = 1,000 in a few seconds):

    - separable: a beta whose margins all exceed the rounding bound of their d-term dot products;
    - not separable (Gordan's alternative): sample weights lambda > 0 whose combination
      :math:`g = Z^\top\lambda` has, in each coordinate beta may move up, :math:`g_j \le` the rounding bound
      of its n terms (and in each it may move down, :math:`-g_j \le` that). Then every allowed beta has
      :math:`\lambda^\top Z\beta` below the rounding of the margins: no beta separates the data by more than
      float64 resolves. At the loss's minimiser the weights sigmoid(-m) are such a lambda (its optimality
      conditions).

    Failing both (data separable or not by less than that), the LP max t s.t. z beta >= t, |beta_j| <= 1
    (HiGHS) is asked for a separating beta; no certificate means not separable.
    """
    # BLAS on one thread: OpenBLAS's threads, competing for busy cores, took 20 s where one took 0.6 s
    # (n = 2,000, d = 500); the products here are matrix-vector but for one Hessian
    with ONE_BLAS_THREAD:
        return _decide(np.asarray(z, float), signs)


def _decide(z, signs):
    """:func:`separable` on float data."""
    n, d = z.shape
    lo, hi = _bounds(d, signs)
    col = np.abs(z).max(axis=0)
    zn = z / np.where(col > 0, col, 1.0)
    rows = np.linalg.norm(zn, axis=1, keepdims=True)
    if np.any(rows == 0):
        return False  # a zero sample has margin 0 under every beta
    zn /= rows
    abs_zn = np.abs(zn)
    margin_tol = (d + 4) * _UNIT * 1.01
    cancel_tol = (n + 4) * _UNIT * 1.01

    def separates(beta):
        return bool(np.all(zn @ beta > margin_tol * (abs_zn @ np.abs(beta)))) and bool(np.any(beta))

    def cancels(beta):
        weights = expit(-(zn @ beta))
        g, bound = zn.T @ weights, cancel_tol * (abs_zn.T @ weights)
        return bool(np.all(np.where(hi > 0, g <= bound, True) & np.where(lo < 0, -g <= bound, True)))

    found = []

    def stop_when_separated(beta):
        if separates(beta):
            found.append(beta.copy())
            raise StopIteration

    fit = optimize.minimize(_logistic, np.zeros(d), args=(zn,), jac=True, method="L-BFGS-B", bounds=list(zip(lo, hi)),
                   callback=stop_when_separated, options={"maxiter": 200, "ftol": 0.0, "gtol": 0.0})
    if found:
        return True
    beta = fit.x
    for _ in range(NEWTON_STEPS):
        if cancels(beta):
            return False
        beta = _newton_step(zn, beta, lo, hi)
        if beta is None:
            break
        if separates(beta):
            return True
    if beta is not None and cancels(beta):
        return False
    res = optimize.linprog(np.r_[np.zeros(d), -1.0], A_ub=np.c_[-zn, np.ones(n)], b_ub=np.zeros(n),
                  bounds=list(zip(np.maximum(lo, -1.0), np.minimum(hi, 1.0))) + [(None, 1.0)], method="highs")
    return bool(res.status == 0 and res.x[-1] > 0 and separates(res.x[:-1]))


#: Newton steps after L-BFGS-B, whose gradients stop near 1e-9 of their terms (the loss stands still in float64):
#: from there one reaches their rounding (each is an n d^2 Hessian: 1-3 s at n = 10,000, d = 1,000)
NEWTON_STEPS = 3


def _logistic(beta, zn):
    """The logistic loss sum_i log(1 + e^-m_i) of margins m = zn beta, and its gradient."""
    m = zn @ beta
    return -log_expit(m).sum(), -(zn.T @ expit(-m))


def _newton_step(zn, beta, lo, hi):
    """One projected Newton step on the logistic loss within the bounds [lo, hi] (coordinates held at a bound
    the gradient pushes against stay there), halved until the loss falls; None where the Hessian is singular
    or no step lowers the loss."""
    loss, grad = _logistic(beta, zn)
    held = ((beta <= lo) & (grad > 0)) | ((beta >= hi) & (grad < 0))
    free = ~held
    m = zn @ beta
    curvature = expit(m) * expit(-m)
    curvature[curvature < _NEGLIGIBLE_CURVATURE] = 0.0  # (their subnormal products slowed the product 30x)
    scaled = zn[:, free] * np.sqrt(curvature)[:, None]
    try:
        factor = cho_factor(dsyrk(1.0, scaled, trans=1), lower=False)  # Z^T diag(curvature) Z, upper triangle
    except np.linalg.LinAlgError:
        return None
    step = np.zeros_like(beta)
    step[free] = cho_solve(factor, -grad[free])
    for _ in range(30):
        trial = np.clip(beta + step, lo, hi)
        if _logistic(trial, zn)[0] <= loss:
            return trial
        step /= 2
    return None


#: sample curvatures below this add nothing a Newton step resolves (the Hessian's entries are O(1) sums)
_NEGLIGIBLE_CURVATURE = 1e-200


def _bounds(d, signs):
    """Bounds on beta from ``signs`` (nan compares false: free)."""
    s = np.full(d, np.nan) if signs is None else np.asarray(signs, float)
    return np.where(s >= 0, 0.0, -np.inf), np.where(s <= 0, 0.0, np.inf)


def _task_of(y) -> str:
    """The task that labels/targets ``y`` (finite floats) say, without ``task=``: classification for labels +-1,
    regression for three or more distinct values; other two-valued y (0/1, 1/2) are refused as ambiguous."""
    if np.all(np.isin(y, (-1.0, 1.0))):
        return "classification"
    values = np.unique(y)
    if len(values) <= 2:
        fix = "pass y = 2*y - 1" if set(values.tolist()) <= {0.0, 1.0} else "map them to +1 and -1"
        raise ValueError(f"y takes only the values {values.tolist()}: labels of two classes or regression targets? "
                         f"For classification {fix}; for regression pass task='regression'.")
    return "regression"


def _is_complex(values) -> bool:
    try:
        return np.iscomplexobj(values)
    except ValueError:  # ragged: reported by _floats
        return False


def _floats(name, values) -> np.ndarray:
    """``values`` as a float64 array (a copy), or a ValueError naming ``name`` (ragged rows gave numpy's
    "inhomogeneous shape", which names no argument; a masked array lost its mask)."""
    refuse_masked(name, values)
    try:
        return np.array(values, dtype=np.float64)
    except OverflowError:
        raise ValueError(f"{name} holds a number beyond float64's range (about 1.8e308); rescale it.") from None
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be an array of numbers, every row of the same length ({err}).") from None
