r"""`IPOPT`: the interior-point NLP solver of Wächter & Biegler ("On the implementation of
an interior-point filter line-search algorithm for large-scale nonlinear programming",
Math. Programming 2006): the IPOPT that `cyipopt` links (the `cyipopt-wheels` distribution
bundles IPOPT with MUMPS: `pip install constrax[trajopt]`), called through its C interface
(`_ipopt_c.py`: IPOPT reads and writes numpy views of its own arrays).

It is fed JAX-compiled callbacks: the objective and its gradient, the constraints, the
values of their sparse Jacobian and of the Hessian of the Lagrangian on fixed structures:
the structural nonzeros of the transcription's blocks, found by sampling and checked at every
evaluation (`_sparsity.py`; docs page "Trajectory optimisation").
"""

import contextlib
import functools
import hashlib
import logging
import math
import os
import types
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import numpy as np

from .._compilation import compiler_options
from .._tolerances import ipopt_constraint_tolerance, ipopt_tolerance
from . import _ipopt_c
from ._progress import progress_reporter
from ._sparsity import (
    Structure,
    StructureViolation,
    block_structure,
    check_dropped,
    sampled_structure,
)

# IPOPT's ApplicationReturnStatus: a name and what IPOPT says of it.
_STATUS = {
    0: ("solved", "Optimal Solution Found."),
    1: ("solved_to_acceptable_level", "Solved To Acceptable Level (not the desired tolerances)."),
    2: ("infeasible_problem_detected", "Converged to a point of local infeasibility."),
    3: ("search_direction_becomes_too_small", "Search Direction is becoming Too Small."),
    4: ("diverging_iterates", "Iterates diverging; problem might be unbounded."),
    5: ("user_requested_stop", "Stopping optimization at current point as requested by user."),
    6: ("feasible_point_found", "Feasible point for square problem found."),
    -1: ("maximum_iterations_exceeded", "Maximum Number of Iterations Exceeded."),
    -2: ("restoration_failed", "Restoration Failed!"),
    -3: ("error_in_step_computation", "Error in step computation!"),
    -4: ("maximum_cputime_exceeded", "Maximum CPU time exceeded."),
    -5: ("maximum_walltime_exceeded", "Maximum wallclock time exceeded."),
    -10: ("not_enough_degrees_of_freedom", "Problem has too few degrees of freedom."),
    -11: ("invalid_problem_definition", "Inconsistent variable bounds or constraint sides."),
    -12: ("invalid_option", "Invalid option encountered."),
    -13: ("invalid_number_detected", "Invalid number in NLP function or derivative detected."),
    -100: ("unrecoverable_exception", "Some uncaught Ipopt exception encountered."),
    -101: ("nonipopt_exception_thrown", "Unknown Exception caught in Ipopt."),
    -102: ("insufficient_memory", "Not enough memory."),
    -199: ("internal_error", "INTERNAL ERROR: Unknown SolverReturn value - Notify IPOPT Authors."),
}


# A solve stops when the dynamics could not be evaluated at trial points of this many
# consecutive iterations: the iterates keep running into a region where the dynamics are
# not defined (e.g. a singular configuration under `cx.KKT()`), and IPOPT's step-backs
# leave them there (`benchmarks/trajopt_singular.py`'s snake cart under `cx.KKT()` on 80
# intervals, before this stop existed: 43 failed trial points in every iteration from the
# 219th to the 400th).
STEP_BACK_ITERATIONS = 10


class NLPResult(NamedTuple):
    """What an NLP solver returns (solver-agnostic)."""

    z: np.ndarray
    status: str
    message: str
    iterations: int
    objective: float
    multipliers: np.ndarray  # of the constraints
    solved: bool  # the solver's own verdict (checked again by the caller)
    objective_at_z: float  # the NLP's own objective and constraints at `z` (not the solver's)
    constraints_at_z: np.ndarray


class IPOPT(eqx.Module):
    """IPOPT with exact first and second derivatives.

    **Arguments:**

    - `tol`: IPOPT's overall (scaled) optimality tolerance (default `None`: `1e-9`, or
      `10 eps` of the problem's dtype where that is larger, `1.2e-6` in float32).
    - `constr_viol_tol`: absolute tolerance on the constraint violation (default `None`:
      `1e-10`, or `10 eps` where that is larger; docs page "Precision").
    - `max_iter`: iteration limit (default 3000).
    - `hessian`: `"exact"` (default) or `"limited-memory"` (L-BFGS: cheaper to compile,
      more iterations).
    - `print_level`: IPOPT's own output, 0 (silent, default) to 12.
    - `options`: further IPOPT options as a dict (e.g. `{"mu_strategy": "monotone"}`).
      constrax sets `mu_strategy="adaptive"` and MUMPS's approximate-minimum-degree
      ordering, `mumps_pivot_order=0` (IPOPT's default, 7, lets MUMPS choose: the same
      iterates, 4–21 % slower on the problems of `benchmarks/trajopt_sparsity.py`); both
      can be overridden here.
    - `sparsity`: the derivative entries IPOPT is given. `"blocks"` (default): every entry
      of the transcription's dense per-interval blocks. `"sampled"`: only those nonzero at
      one of a few random points (the structural nonzeros: on the knife-edge parking
      problem 5,000 of 16,250 Jacobian and 1,059 of 4,134 Hessian entries); the others are
      checked to be zero (to round-off) at every evaluation, and a nonzero one (a
      derivative behind a `jnp.where`) makes the solve start again on the dense blocks,
      with a warning naming the entry. The solution is the same to round-off, but MUMPS
      factorises the finer pattern more slowly (in smaller fronts): slower on every problem
      measured (`benchmarks/trajopt_sparsity.py`).
    - `library`: the path of an IPOPT shared library (3.14 or later) to call instead of
      the one `cyipopt` links: a build with other linear solvers (HSL's), or a newer one
      (e.g. the `libipopt.so` CasADi bundles: IPOPT 3.14.19 and MUMPS 5.8, as fast as
      `cyipopt-wheels`' 3.14.11 and MUMPS 5.5 on parking and 18 % faster on the cart-pole
      of `benchmarks/trajopt_sparsity.py`). `None` (default): `cyipopt`'s.

    Where one of the library's checks of the dynamics fails at a trial point of IPOPT's
    line search (e.g. a singular saddle-point matrix under `cx.KKT()`, or a non-finite
    state after a long step), IPOPT is told the evaluation failed and cuts its step back;
    the message of an unsolved run says at how many trial points, naming the last check.
    If that happens in 10 consecutive iterations the solve stops with status
    `"dynamics_not_evaluable"`: the iterates keep running into that region. At the
    starting point, and in the derivatives at an accepted iterate, a failed check raises
    (docs page "Trajectory optimisation").

    **Example:** `cx.fit.IPOPT(tol=1e-8, max_iter=500, options={"linear_solver": "mumps"})`
    """

    tol: float | None = eqx.field(static=True, default=None)
    constr_viol_tol: float | None = eqx.field(static=True, default=None)
    max_iter: int = eqx.field(static=True, default=3000)
    hessian: str = eqx.field(static=True, default="exact")
    print_level: int = eqx.field(static=True, default=0)
    options: Any = eqx.field(static=True, default=None)
    sparsity: str = eqx.field(static=True, default="blocks")
    library: str | os.PathLike | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.sparsity not in ("sampled", "blocks"):
            raise ValueError(f"`sparsity` must be 'sampled' or 'blocks', got {self.sparsity!r}")
        if self.library is not None and not isinstance(self.library, str | os.PathLike):
            raise TypeError(
                f"`library` must be the path of an IPOPT shared library or None, got "
                f"{self.library!r}"
            )
        if self.hessian not in ("exact", "limited-memory"):
            raise ValueError(f"`hessian` must be 'exact' or 'limited-memory', got {self.hessian!r}")
        for name in ("tol", "constr_viol_tol"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, int | float) and v > 0 and math.isfinite(v)):
                raise ValueError(f"`{name}` must be a positive number or None, got {v!r}")
        if not isinstance(self.max_iter, int) or self.max_iter < 0:
            raise ValueError(f"`max_iter` must be a non-negative int, got {self.max_iter!r}")
        if self.options is not None and not isinstance(self.options, dict):
            raise TypeError(f"`options` must be a dict of IPOPT options, got {self.options!r}")

    def minimise(
        self,
        nlp,
        z0: np.ndarray,
        *,
        progress: bool | None = False,
        callback: Callable | None = None,
        multipliers0: np.ndarray | None = None,
        label: str = "constrax.fit (IPOPT)",
    ) -> NLPResult:
        """Solve `nlp` (a transcription's `AbstractNLP`) from `z0`. `progress`: `None`
        reports on stderr once the solve has run 5 s, `True` from the start (a tqdm bar
        where tqdm is installed), `False` never."""
        try:
            _ipopt_c.library(self.library)
        except ModuleNotFoundError:
            raise ImportError(
                "cx.fit.IPOPT needs cyipopt: pip install 'constrax[trajopt]' (installs "
                "cyipopt-wheels, which bundles IPOPT)"
            ) from None
        L = nlp.layout
        lo, hi = nlp.variable_bounds()
        dtype = np.asarray(nlp.problem.t1).dtype
        evaluator = _Evaluator(nlp, dtype)
        if self.sparsity == "blocks":
            structure = block_structure(L)
        else:
            structure = _sampled(evaluator, L, lo, hi, hessian=self.hessian == "exact")
        run = functools.partial(
            self._run, nlp, evaluator, z0, (progress, label), callback, multipliers0
        )
        result = run(structure)
        e = evaluator.violation
        if e is None:
            return result
        names = nlp.constraint_names() if e.kind == "Jacobian" else nlp.variable_names()
        warnings.warn(
            f"IPOPT: the {e.kind} entry ({names[e.row]}, {nlp.variable_names()[e.col]}) "
            f"was zero at the {structure.samples} random points sampled to find the "
            f"structural nonzeros, but is {e.value:.6g} at evaluation {e.evaluation} of "
            "the solve (a derivative that vanishes on part of the space only, e.g. behind "
            "a jnp.where); solving again from the start with the dense blocks "
            "(cx.fit.IPOPT(sparsity='blocks') does so from the outset)",
            stacklevel=3,
        )
        _STRUCTURES[(evaluator.key, self.hessian == "exact")] = block_structure(L)
        return run(block_structure(L))

    def _run(
        self, nlp, evaluator, z0, progress, callback, multipliers0, structure: Structure
    ) -> NLPResult:
        """One IPOPT solve on the derivative entries `structure`."""
        L = nlp.layout
        lo, hi = nlp.variable_bounds()
        cl, cu = nlp.constraint_bounds()
        evaluator.use(structure)
        bar = progress_reporter(progress[0], self.max_iter, progress[1])
        count = [0]
        # Consecutive iterations whose line search met a failed check, and the number of
        # failed checks at the last iteration.
        streak = [0, 0]
        # The dynamics' checks that failed at trial points, as messages: IPOPT is told the
        # evaluation failed and steps back (a step that left the region where the
        # dynamics are defined). At the starting point (IPOPT's first evaluation, of z0
        # moved inside its bounds) one raises.
        trial_errors: list[str] = []

        def evaluation_error(z, error):
            message = _check_message(error)
            if message is None or not evaluator.evaluated:
                return False
            trial_errors.append(message)
            return True

        def intermediate(it, obj, inf_pr):
            count[0] = it
            streak[0] = streak[0] + 1 if len(trial_errors) > streak[1] else 0
            streak[1] = len(trial_errors)
            if streak[0] >= STEP_BACK_ITERATIONS:
                return False  # stuck against points where the dynamics are not defined
            if evaluator.violation is not None:
                return False  # a dropped entry is not zero: stop, solve again on the blocks
            if bar is not None:
                bar.update(it, obj, inf_pr)
            if callback is not None and callback(it, obj, inf_pr) is True:
                return False  # the callback asked to stop
            return True

        callbacks = types.SimpleNamespace(
            objective=evaluator.objective,
            gradient=evaluator.gradient,
            constraints=evaluator.constraints,
            jacobian=evaluator.jacobian,
            hessian=evaluator.hessian,
            intermediate=intermediate,
            evaluation_error=evaluation_error,
        )
        dtype = np.asarray(nlp.problem.t1).dtype
        options = {
            "tol": float(ipopt_tolerance(dtype) if self.tol is None else self.tol),
            "constr_viol_tol": float(
                ipopt_constraint_tolerance(dtype)
                if self.constr_viol_tol is None
                else self.constr_viol_tol
            ),
            "max_iter": int(self.max_iter),
            "print_level": int(self.print_level),
            "sb": "yes",
            "hessian_approximation": self.hessian,
            "mu_strategy": "adaptive",
            **_MUMPS_DEFAULTS,
        }
        if multipliers0 is not None:
            options["warm_start_init_point"] = "yes"
        options.update(self.options or {})
        try:
            with _quiet_failed_checks():
                z, objective, code, multipliers = _ipopt_c.solve(
                    L.nz,
                    lo,
                    hi,
                    L.nc,
                    cl,
                    cu,
                    (structure.jac_rows, structure.jac_cols),
                    (structure.hess_rows, structure.hess_cols),
                    callbacks,
                    z0,
                    options,
                    multipliers0,
                    self.library,
                    optional=frozenset(_MUMPS_DEFAULTS).difference(self.options or {}),
                )
        except Exception as e:
            if bar is not None:
                bar.close()
            failed = _evaluation_error(e, count[0])
            if failed is None:
                raise
            raise failed from e
        status, msg = _STATUS.get(code, (f"ipopt_status_{code}", f"IPOPT returned status {code}"))
        if streak[0] >= STEP_BACK_ITERATIONS and code == 5:
            status = "dynamics_not_evaluable"
            n = STEP_BACK_ITERATIONS
            msg = f"Stopped: the line search stepped back in {n} consecutive iterations."
        if trial_errors and code != 0:
            msg = msg.rstrip(".") + (
                f"; the dynamics could not be evaluated at {len(trial_errors)} trial "
                f"point(s) IPOPT stepped back from, the last: {trial_errors[-1]}"
            )
        if bar is not None:
            bar.close(status)
        return NLPResult(
            z=z,
            status=status,
            message=msg,
            iterations=count[0],
            objective=objective,
            multipliers=multipliers,
            solved=code == 0,
            objective_at_z=evaluator.objective(z),
            constraints_at_z=evaluator.constraints(z),
        )


# MUMPS's fill-reducing ordering: approximate minimum degree (`mumps_pivot_order` 0) where
# IPOPT leaves MUMPS to choose (7). On the transcriptions' banded block structure it gives
# the same iterates and saves 15-17 % of a parking solve at N = 50-400 and 4 % of the
# cart-pole's (`benchmarks/trajopt_sparsity.py`, 2026-11-28). Set where IPOPT knows the
# option (a library built without MUMPS does not), and the user's `options` override it.
_MUMPS_DEFAULTS = {"mumps_pivot_order": 0}


# The programs IPOPT's callbacks read, each one XLA program: the values (objective and
# constraints: IPOPT asks for both at every trial point), the first derivatives (gradient and
# Jacobian: asked for together at every accepted point) and the Hessian of the Lagrangian.
_PROGRAMS = {
    "values": lambda nlp, z: (nlp.objective(z), nlp.constraints(z)),
    "derivatives": lambda nlp, z: (nlp.objective_gradient(z), nlp.jacobian_values(z)),
    "hessian": lambda nlp, z, lam, s: nlp.hessian_values(z, lam, s),
}


@functools.lru_cache(maxsize=64)
def _jitted(treedef, leaves: tuple, arrays_treedef, name: str) -> Callable:
    """`jax.jit` of one program for the static part of an NLP (its tree structure and
    non-array leaves: the user's functions, sizes), called with the NLP's arrays as a flat
    tuple (flattened once per solve; an `eqx.filter_jit` call would flatten and hash the
    whole problem, and a pytree argument be flattened in Python, at each of IPOPT's calls).
    Compiled once per problem structure, on the CPU with XLA's LLVM IR emitters
    (`compiler_options`: on the rolling disk's Hessian at N = 20, 25 s of XLA compile
    against 11 s with the default emitters, the same run time and values to round-off;
    `benchmarks/trajopt_compile.py`)."""
    program = _PROGRAMS[name]
    static = jax.tree.unflatten(treedef, leaves)

    def fn(arrays, *args):
        dynamic = jax.tree.unflatten(arrays_treedef, arrays)
        return program(eqx.combine(dynamic, static), *args)

    return jax.jit(fn, compiler_options=compiler_options(jax.default_backend()))


def _split(nlp):
    """`(static treedef, static leaves, arrays treedef, arrays)` of an NLP: what keys its
    compiled programs, and the arrays they are called with (on the device once)."""
    dynamic, static = eqx.partition(nlp, eqx.is_array)
    arrays, arrays_treedef = jax.tree.flatten(dynamic)
    leaves, treedef = jax.tree.flatten(static)
    return treedef, tuple(leaves), arrays_treedef, tuple(jax.numpy.asarray(a) for a in arrays)


class _Evaluator:
    """IPOPT's callbacks on one NLP: numpy float64 in and out, each program called once per
    point. IPOPT evaluates the objective and the constraints at the same trial point, and the
    gradient and the Jacobian at the same accepted point, so each pair is computed by one
    program and kept for the last point.

    The Jacobian and the Hessian are returned on the entries of a `Structure` (`use`; all
    entries of the blocks until then): the programs compute the dense blocks, the kept
    entries are gathered and the dropped ones checked to be zero to round-off (numpy, a few
    microseconds: a program returning only the kept entries would be a second compile)."""

    def __init__(self, nlp, dtype):
        treedef, leaves, arrays_treedef, self._arrays = _split(nlp)
        self._static = (treedef, leaves, arrays_treedef)
        self._fns = {name: _jitted(treedef, leaves, arrays_treedef, name) for name in _PROGRAMS}
        self._dtype = np.dtype(dtype)
        self._last = {"values": None, "derivatives": None}
        self._layout = nlp.layout
        self._structure = None
        self.evaluations = {"Jacobian": 0, "Hessian": 0}
        # The first dropped entry found nonzero (`StructureViolation`), kept rather than
        # raised (an exception in a callback would end the solve with it): the solve is
        # stopped at the next iteration (`intermediate`) and started again on the blocks.
        self.violation = None

    @property
    def key(self):
        """The NLP's static part and a digest of its arrays (what its structure depends on)."""
        return (*self._static, _digest(self._arrays))

    def use(self, structure: Structure) -> None:
        """Return the derivatives on `structure` from now on (`None`: the dense blocks)."""
        self._structure = None if structure is None or structure.samples == 0 else structure
        self.evaluations = {"Jacobian": 0, "Hessian": 0}
        self.violation = None

    def _z(self, z) -> np.ndarray:
        return np.ascontiguousarray(z, dtype=self._dtype)

    @property
    def evaluated(self) -> bool:
        """Whether the objective and constraints have been evaluated at some point."""
        return self._last["values"] is not None

    def _pair(self, name: str, z):
        z = self._z(z)
        last = self._last[name]
        if last is not None and np.array_equal(last[0], z):
            return last[1]
        out = tuple(np.asarray(a, dtype=np.float64) for a in self._fns[name](self._arrays, z))
        self._last[name] = (z.copy(), out)
        return out

    def objective(self, z) -> float:
        return float(self._pair("values", z)[0])

    def constraints(self, z) -> np.ndarray:
        return self._pair("values", z)[1]

    def gradient(self, z) -> np.ndarray:
        return self._pair("derivatives", z)[0]

    def block_jacobian(self, z) -> np.ndarray:
        """The Jacobian's values on the dense blocks."""
        return self._pair("derivatives", z)[1]

    def block_hessian(self, z, lagrange, obj_factor) -> np.ndarray:
        """The Hessian's values on the dense blocks (unique lower-triangle pairs)."""
        lam = np.ascontiguousarray(lagrange, dtype=self._dtype)
        s = np.asarray(obj_factor, dtype=self._dtype)
        return np.asarray(self._fns["hessian"](self._arrays, self._z(z), lam, s), np.float64)

    def _check(self, kind, values, dropped, rows, cols, n) -> None:
        if self.violation is None:
            try:
                check_dropped(kind, values, dropped, rows, cols, n)
            except StructureViolation as e:
                self.violation = e

    def _kept(self, kind, values, kept, dropped, rows, cols) -> np.ndarray:
        """The kept entries of `values`, the dropped ones checked (`_check`)."""
        self.evaluations[kind] += 1
        self._check(kind, values, dropped, rows, cols, self.evaluations[kind])
        return values[kept]

    def jacobian(self, z) -> np.ndarray:
        values = self.block_jacobian(z)
        S, L = self._structure, self._layout
        if S is None:
            return values
        return self._kept("Jacobian", values, S.jac_kept, S.jac_dropped, L.jac_rows, L.jac_cols)

    def hessian(self, z, lagrange, obj_factor) -> np.ndarray:
        values = self.block_hessian(z, lagrange, obj_factor)
        S, L = self._structure, self._layout
        if S is None:
            return values
        return self._kept("Hessian", values, S.hess_kept, S.hess_dropped, L.hess_rows, L.hess_cols)


def _digest(arrays) -> bytes:
    """A digest of the values of an NLP's arrays (with the static part, the key of its
    sampled structure: two problems that differ only in data may differ in structure,
    e.g. a parameter that is zero)."""
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        a = np.asarray(a)
        h.update(str((a.shape, a.dtype)).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.digest()


# The sampled structures of the last problems solved (keyed like their programs, and by
# their data): a repeated solve of a problem does not sample again.
_STRUCTURES: dict = {}
_STRUCTURES_KEPT = 64


def _sampled(evaluator: _Evaluator, layout, lo, hi, *, hessian: bool) -> Structure:
    """The sampled structure of `evaluator`'s NLP (`_sparsity.sampled_structure`); without
    an exact `hessian`, the Hessian's blocks stay as they are (IPOPT does not ask for it,
    and sampling would compile its program)."""
    key = (evaluator.key, hessian)
    if key in _STRUCTURES:
        return _STRUCTURES[key]
    if hessian:
        H = evaluator.block_hessian
    else:
        H = lambda z, lam, s: np.ones(layout.hess_rows.shape[0])  # noqa: E731 - all kept
    structure = sampled_structure(layout, evaluator.block_jacobian, H, lo, hi)
    if len(_STRUCTURES) >= _STRUCTURES_KEPT:
        _STRUCTURES.pop(next(iter(_STRUCTURES)))
    _STRUCTURES[key] = structure
    return structure


class _FailedCheck(logging.Filter):
    """Drops JAX's log of a callback that raised a constrax check (`equinox.error_if`
    inside a compiled program logs the whole traceback once per failing call, before the
    error reaches IPOPT's caller): `_evaluation_error` raises it again in one line, with
    the original error chained."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or "constrax:" not in str(error)


@contextlib.contextmanager
def _quiet_failed_checks():
    """`_FailedCheck` on JAX's callback logger for the duration of a solve."""
    logger, check = logging.getLogger("jax._src.callback"), _FailedCheck()
    logger.addFilter(check)
    try:
        yield
    finally:
        logger.removeFilter(check)


def _check_message(error: BaseException) -> str | None:
    """The message of a check of the dynamics that failed inside one of IPOPT's callbacks
    (raised by `equinox.error_if` in the compiled program, so wrapped in XLA's runtime error
    and its traceback), in a line; `None` for other errors."""
    text = str(error)
    start = text.find("constrax:")
    if start < 0:
        return None
    return text[start:].splitlines()[0]


def _evaluation_error(error: Exception, iteration: int) -> RuntimeError | None:
    """A failed check of the dynamics (`_check_message`) that stopped the solve, as a
    `RuntimeError` that says so in a line; `None` for other errors. It stops the solve at
    the starting point, or in the derivatives at an accepted iterate; at a trial point of
    the line search IPOPT steps back instead (`IPOPT._run`)."""
    message = _check_message(error)
    if message is None:
        return None
    where = "the starting point" if iteration == 0 else f"the iterate of iteration {iteration}"
    return RuntimeError(f"cx.fit.IPOPT: evaluating the NLP failed at {where}: {message}")
