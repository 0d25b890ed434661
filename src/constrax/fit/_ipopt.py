r"""`IPOPT`: the interior-point NLP solver of Wächter & Biegler ("On the implementation of
an interior-point filter line-search algorithm for large-scale nonlinear programming",
Math. Programming 2006), through `cyipopt` (the `cyipopt-wheels` distribution bundles
IPOPT with MUMPS: `pip install constrax[trajopt]`).

It is fed JAX-compiled callbacks: the objective and its gradient, the constraints, the
values of their sparse Jacobian and of the Hessian of the Lagrangian on fixed structures
(docs page "Trajectory optimisation").
"""

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import numpy as np

# IPOPT's ApplicationReturnStatus, as names.
_STATUS = {
    0: "solved",
    1: "solved_to_acceptable_level",
    2: "infeasible_problem_detected",
    3: "search_direction_becomes_too_small",
    4: "diverging_iterates",
    5: "user_requested_stop",
    6: "feasible_point_found",
    -1: "maximum_iterations_exceeded",
    -2: "restoration_failed",
    -3: "error_in_step_computation",
    -4: "maximum_cputime_exceeded",
    -5: "maximum_walltime_exceeded",
    -10: "not_enough_degrees_of_freedom",
    -11: "invalid_problem_definition",
    -12: "invalid_option",
    -13: "invalid_number_detected",
    -100: "unrecoverable_exception",
    -101: "nonipopt_exception_thrown",
    -102: "insufficient_memory",
    -199: "internal_error",
}


class NLPResult(NamedTuple):
    """What an NLP solver returns (solver-agnostic)."""

    z: np.ndarray
    status: str
    message: str
    iterations: int
    objective: float
    multipliers: np.ndarray  # of the constraints
    solved: bool  # the solver's own verdict (checked again by the caller)


class IPOPT(eqx.Module):
    """IPOPT with exact first and second derivatives.

    **Arguments:**

    - `tol`: IPOPT's overall (scaled) optimality tolerance (default `1e-9`).
    - `constr_viol_tol`: absolute tolerance on the constraint violation (default
      `1e-10`).
    - `max_iter`: iteration limit (default 3000).
    - `hessian`: `"exact"` (default) or `"limited-memory"` (L-BFGS: cheaper to compile,
      more iterations).
    - `print_level`: IPOPT's own output, 0 (silent, default) to 12.
    - `options`: further IPOPT options as a dict (e.g. `{"mu_strategy": "monotone"}`).

    **Example:** `cx.fit.IPOPT(tol=1e-8, max_iter=500, options={"linear_solver": "mumps"})`
    """

    tol: float = eqx.field(static=True, default=1e-9)
    constr_viol_tol: float = eqx.field(static=True, default=1e-10)
    max_iter: int = eqx.field(static=True, default=3000)
    hessian: str = eqx.field(static=True, default="exact")
    print_level: int = eqx.field(static=True, default=0)
    options: Any = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.hessian not in ("exact", "limited-memory"):
            raise ValueError(f"`hessian` must be 'exact' or 'limited-memory', got {self.hessian!r}")
        for name in ("tol", "constr_viol_tol"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and v > 0 and math.isfinite(v)):
                raise ValueError(f"`{name}` must be a positive number, got {v!r}")
        if not isinstance(self.max_iter, int) or self.max_iter < 0:
            raise ValueError(f"`max_iter` must be a non-negative int, got {self.max_iter!r}")
        if self.options is not None and not isinstance(self.options, dict):
            raise TypeError(f"`options` must be a dict of IPOPT options, got {self.options!r}")

    def minimise(
        self,
        nlp,
        z0: np.ndarray,
        *,
        progress: bool = False,
        callback: Callable | None = None,
        multipliers0: np.ndarray | None = None,
    ) -> NLPResult:
        """Solve `nlp` (a `CollocationNLP`) from `z0`."""
        try:
            import cyipopt
        except ImportError:
            raise ImportError(
                "cx.fit.IPOPT needs cyipopt: pip install 'constrax[trajopt]' (installs "
                "cyipopt-wheels, which bundles IPOPT)"
            ) from None
        L = nlp.layout
        lo, hi = nlp.variable_bounds()
        cl, cu = nlp.constraint_bounds()
        dtype = np.asarray(nlp.problem.t1).dtype
        fns = _compiled(nlp, dtype)
        bar = _progress(progress, self.max_iter)
        count = [0]

        class _Callbacks:
            def objective(self, z):
                return float(fns.objective(z))

            def gradient(self, z):
                return np.asarray(fns.gradient(z), dtype=np.float64)

            def constraints(self, z):
                return np.asarray(fns.constraints(z), dtype=np.float64)

            def jacobianstructure(self):
                return L.jac_rows, L.jac_cols

            def jacobian(self, z):
                return np.asarray(fns.jacobian(z), dtype=np.float64)

            def hessianstructure(self):
                return L.hess_rows, L.hess_cols

            def hessian(self, z, lagrange, obj_factor):
                return np.asarray(fns.hessian(z, lagrange, obj_factor), dtype=np.float64)

            def intermediate(self, alg_mod, it, obj, inf_pr, inf_du, *rest):
                count[0] = it
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(objective=f"{obj:.6g}", infeasibility=f"{inf_pr:.1e}")
                if callback is not None and callback(it, obj, inf_pr) is True:
                    return False  # the callback asked to stop
                return True

        problem = cyipopt.Problem(
            n=L.nz, m=L.nc, problem_obj=_Callbacks(), lb=lo, ub=hi, cl=cl, cu=cu
        )
        options = {
            "tol": float(self.tol),
            "constr_viol_tol": float(self.constr_viol_tol),
            "max_iter": int(self.max_iter),
            "print_level": int(self.print_level),
            "sb": "yes",
            "hessian_approximation": self.hessian,
            "mu_strategy": "adaptive",
        }
        if multipliers0 is not None:
            options["warm_start_init_point"] = "yes"
        options.update(self.options or {})
        for key, value in options.items():
            problem.add_option(key, value)
        try:
            if multipliers0 is not None:
                z, info = problem.solve(np.asarray(z0, np.float64), lagrange=multipliers0)
            else:
                z, info = problem.solve(np.asarray(z0, np.float64))
        finally:
            if bar is not None:
                bar.close()
        code = int(info["status"])
        msg = info["status_msg"]
        msg = msg.decode() if isinstance(msg, bytes) else str(msg)
        return NLPResult(
            z=np.asarray(z),
            status=_STATUS.get(code, f"ipopt_status_{code}"),
            message=msg,
            iterations=count[0],
            objective=float(info["obj_val"]),
            multipliers=np.asarray(info["mult_g"]),
            solved=code == 0,
        )


class _Functions(NamedTuple):
    objective: Callable
    gradient: Callable
    constraints: Callable
    jacobian: Callable
    hessian: Callable


_METHODS = {
    "objective": lambda nlp, z: nlp.objective(z),
    "gradient": lambda nlp, z: nlp.objective_gradient(z),
    "constraints": lambda nlp, z: nlp.constraints(z),
    "jacobian": lambda nlp, z: nlp.jacobian_values(z),
    "hessian": lambda nlp, z, lam, s: nlp.hessian_values(z, lam, s),
}


@functools.lru_cache(maxsize=64)
def _jitted(treedef, leaves: tuple, name: str) -> Callable:
    """`jax.jit` of one callback for the static part of an NLP (its tree structure and
    non-array leaves: the user's functions, sizes): compiled once per problem structure,
    and called with the NLP's arrays flattened once per solve, where an `eqx.filter_jit`
    call would flatten and hash the whole problem at each of IPOPT's calls."""
    method = _METHODS[name]
    static = jax.tree.unflatten(treedef, leaves)
    return jax.jit(lambda dynamic, *args: method(eqx.combine(dynamic, static), *args))


def _compiled(nlp, dtype) -> _Functions:
    """The NLP's callbacks, compiled once per problem structure."""
    dynamic, static = eqx.partition(nlp, eqx.is_array)
    dynamic = jax.tree.map(jax.numpy.asarray, dynamic)  # on the device once, not per call
    leaves, treedef = jax.tree.flatten(static)
    as_z = lambda z: np.asarray(z, dtype=dtype)
    fns = {name: _jitted(treedef, tuple(leaves), name) for name in _METHODS}
    return _Functions(
        objective=lambda z: fns["objective"](dynamic, as_z(z)),
        gradient=lambda z: fns["gradient"](dynamic, as_z(z)),
        constraints=lambda z: fns["constraints"](dynamic, as_z(z)),
        jacobian=lambda z: fns["jacobian"](dynamic, as_z(z)),
        hessian=lambda z, lam, s: fns["hessian"](dynamic, as_z(z), as_z(lam), as_z(s)),
    )


def _progress(enabled: bool, total: int):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        warnings.warn("progress=True needs tqdm (pip install tqdm)", stacklevel=4)
        return None
    return tqdm(total=total, desc="constrax.fit (IPOPT)", leave=False)
