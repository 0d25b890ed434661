r"""`OptimalControlProblem`: what the user means by a trajectory optimisation problem.

Minimise
$$J = \int_{t_0}^{t_1} \ell(t, q, \dot q, u, p)\,dt + \phi(t_1, q(t_1), \dot q(t_1), p)$$
over the controls $u(t)$, optionally some physical parameters and the final time $t_1$,
subject to the constrained dynamics of a `cx.System` (either prescription, any constraint
kind), fixed initial and terminal states, terminal equalities $\psi = 0$, path
inequalities $h(t, q, \dot q, u, p) \le 0$ and bounds on $u$, $q$, $\dot q$, the
parameters and $t_1$ (docs page "Trajectory optimisation").

The control is data inside the parameter pytree: `control(params)` locates an array leaf
of shape `(nu,)` that the system's force reads, e.g.
`force=lambda t, q, qd, p: B(q) @ p["u"]`. A transcription (`cx.fit.HermiteSimpson`)
turns the problem into a nonlinear program.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, ArrayLike, Float

from .._checks import check_options
from .._custom_types import Params
from .._layout import row_layout
from .._prescriptions import AbstractPrescription, DAlembert
from .._solve import KKT, AbstractConstraintSolver
from .._state_length import length_mismatch_error
from .._system import System
from .._terms import position_residual, stacked_residual
from .._tolerances import initial_tolerance
from ._bounds import bounds_along, check_bound_function, constant_bounds

_INF = np.inf
# The bounds that may be functions of time: their key in `bounds` and their argument.
_BOUND_NAMES = {"u": "control_bounds", "q": "q_bounds", "qd": "qd_bounds"}


def _scalar_shape(name: str, fn, *args, expect: str) -> tuple[int, ...]:
    """The shape `fn(*args)` returns, checked against `expect` (`"scalar"` or `"rows"`), and
    an `IndexError` naming `name` where `fn` indexes an argument out of its range: JAX
    clamps such an index (`q[3]` of a `q` of 1 entry reads `q[0]`), which would silently
    impose the row on another coordinate."""
    try:
        out = jax.eval_shape(fn, *args)
    except Exception as e:  # noqa: BLE001 - re-raised with the argument named
        raise type(e)(f"`{name}` failed on arguments of the right shapes: {e}") from e
    try:
        error, _ = checkify.checkify(fn, errors=checkify.index_checks)(*args)
    except Exception:  # noqa: BLE001 - a function checkify cannot trace: shape checked above
        error = None
    message = None if error is None else error.get()
    if message:
        raise IndexError(
            f"`{name}` indexes an argument out of its range (JAX would clamp the index and "
            f"read another entry): {message.strip()}"
        )
    shape = getattr(out, "shape", None)
    if shape is None:
        raise ValueError(f"`{name}` must return an array, got {type(out).__name__}")
    if expect == "scalar" and shape != ():
        raise ValueError(f"`{name}` must return a scalar, got shape {shape}")
    if expect == "rows" and len(shape) > 1:
        raise ValueError(f"`{name}` must return a scalar or shape (k,), got shape {shape}")
    return shape


def _leaf_name(params, control) -> str:
    """`params[...]`: the path of the leaf `control(params)` locates (`"control(params)"`
    where it is not a leaf of `params` itself)."""
    u = control(params)
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        if leaf is u:
            return f"params{jax.tree_util.keystr(path)}"
    return "control(params)"


def _check_control_enters_force(system, control, params, states, t0, t1, n, nu, dtype) -> None:
    r"""Refuse a control leaf the force does not read: $\partial Q/\partial u = 0$ at the
    initial guess's ends (the control at its value in `params`) and at 4 random states,
    times and controls (seeded). A `ValueError` naming the leaf."""
    u0 = jnp.asarray(control(params), dtype)

    def force(t, q, qd, u):
        return system.force(t, q, qd, eqx.tree_at(control, params, u))

    zeros = jnp.zeros(n, dtype)
    points = [
        (t0, states.get(k) if states.get(k) is not None else zeros, states.get(kd), u0)
        for k, kd in (("q0", "qd0"), ("q1", "qd1"))
    ]
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    for key in keys:
        kt, kq, kqd, ku = jax.random.split(key, 4)
        t = t0 + (t1 - t0) * jax.random.uniform(kt, (), dtype)
        draw = [jax.random.normal(k, (m,), dtype) for k, m in ((kq, n), (kqd, n), (ku, nu))]
        points.append((t, *draw))
    moved = jnp.zeros(nu, bool)
    jac = jax.jacfwd(force, argnums=3)
    for t, q, qd, u in points:
        qd = zeros if qd is None else qd
        try:
            J = jac(jnp.asarray(t, dtype), q, qd, u)
        except Exception:  # noqa: BLE001 - a force undefined at a random state: no verdict
            continue
        moved = moved | jnp.any(J != 0, axis=0)  # NaN counts as read
    if not bool(jnp.any(moved)):
        raise ValueError(
            f"`control` locates {_leaf_name(params, control)}, which the system's force does "
            "not read: its derivative dQ/du is zero at the initial and terminal states and at "
            "4 random states, so no control could move the system. Point `control` at the "
            "leaf the force reads (e.g. control=lambda p: p['u'] for a force reading p['u'])"
        )


def _check_arguments(system, control, params, prescription, constraint_solver) -> int:
    """The system, the options and the control leaf; returns the control's size `nu`."""
    if not isinstance(system, System):
        raise TypeError(f"`system` must be a cx.System, got {type(system).__name__}")
    check_options(prescription=prescription, constraint_solver=constraint_solver)
    if system.force is None:
        raise ValueError(
            "`system` has no force: the control enters through the force, e.g. "
            "force=lambda t, q, qd, p: B(q) @ p['u']"
        )
    if not callable(control):
        raise TypeError("`control` must be a function where(params) -> the control array")
    try:
        u = control(params)
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"`control(params)` failed: {e!r}") from e
    if not eqx.is_array_like(u) or np.ndim(u) != 1:
        raise ValueError(
            "`control(params)` must locate an array leaf of shape (nu,) that the force "
            f"reads, got {type(u).__name__} of shape {np.shape(u)}"
        )
    return int(np.shape(u)[0])


def _check_states(system, control, params, nu, t0, q0, qd0, q1, qd1) -> tuple[dict, int, object]:
    """The fixed states `(n,)`, finite and of one length; returns them by name (`None`
    where free), `n` and the dtype (of the first given, float where it is an integer)."""
    # The state at which shapes are checked: q0 if given, else q1, else needs one.
    given = [(k, x) for k, x in (("q0", q0), ("q1", q1), ("qd0", qd0), ("qd1", qd1))]
    ref_name, ref = next(((k, x) for k, x in given if x is not None), (None, None))
    if ref is None:
        raise ValueError("give the initial state `q0`, `qd0` (or at least one of q0/q1)")
    ref = jnp.asarray(ref)
    dtype = ref.dtype if jnp.issubdtype(ref.dtype, jnp.inexact) else jnp.result_type(float)
    n = int(ref.shape[0]) if ref.ndim == 1 else -1
    if n < 1:
        raise ValueError(f"the states must have shape (n,), got {ref.shape}")
    states = {}
    given = {k: jnp.asarray(x, dtype) for k, x in given if x is not None}
    if all(x.ndim == 1 for x in given.values()) and len({x.shape for x in given.values()}) > 1:
        p_try = eqx.tree_at(control, params, jnp.zeros(nu, dtype))
        raise length_mismatch_error(system, t0, given, p_try, "cx.fit.OptimalControlProblem")
    for name, x in (("q0", q0), ("qd0", qd0), ("q1", q1), ("qd1", qd1)):
        if x is not None:
            x = jnp.asarray(x, dtype=dtype)
            if x.shape != (n,):
                raise ValueError(
                    f"`{name}` must have shape (n,) = ({n},) like `{ref_name}`, got {x.shape}"
                )
            if not bool(jnp.all(jnp.isfinite(x))):
                raise ValueError(f"`{name}` holds non-finite values: {x}")
        states[name] = x
    return states, n, dtype


def _check_times(t0, t1, t1_bounds) -> tuple[float, float, bool, tuple[np.ndarray, np.ndarray]]:
    """`t1 > t0`, and the bounds of a free final time around its guess; returns
    `(t0, t1, free_time, (lower, upper))`."""
    t0 = float(t0)
    t1 = float(t1)
    if not t1 > t0:
        raise ValueError(f"expected t1 > t0, got t0={t0}, t1={t1}")
    free_time = t1_bounds is not None
    tlo, thi = constant_bounds("t1_bounds", t1_bounds, (), np.float64)
    if free_time:
        if not tlo > t0:
            raise ValueError(
                f"`t1_bounds`: the lower bound of the final time must be > t0 = {t0} "
                f"(a horizon of positive length), got {float(tlo)}"
            )
        if not tlo <= t1 <= thi:
            raise ValueError(f"`t1` = {t1} (the guess) must lie within t1_bounds {t1_bounds}")
    return t0, t1, free_time, (tlo, thi)


def _check_mu0(mu0, prescription, m: int, dtype) -> Array | None:
    """The vakonomic multipliers at $t_0$, `(m,)`; refused under a prescription without."""
    if prescription.multiplier_state:
        if mu0 is not None:
            mu0 = jnp.asarray(mu0, dtype)
            if mu0.shape != (m,):
                raise ValueError(f"`mu0` must have shape (m,) = ({m},), got {mu0.shape}")
    elif mu0 is not None:
        raise ValueError("`mu0` is only used by the vakonomic prescription; drop it")
    return mu0


def _check_functions(
    running_cost, terminal_cost, terminal_constraint, path_constraint, t, zeros, nu, p_u
) -> tuple[int, int]:
    """The shapes the costs (scalars) and the constraint functions (rows) return at zero
    states and controls; returns the row counts `(n_terminal, n_path)`."""
    u = jnp.zeros(nu, zeros.dtype)
    if running_cost is not None:
        _scalar_shape(
            "running_cost(t, q, qd, u, p)", running_cost, t, zeros, zeros, u, p_u, expect="scalar"
        )
    if terminal_cost is not None:
        _scalar_shape(
            "terminal_cost(t, q, qd, p)", terminal_cost, t, zeros, zeros, p_u, expect="scalar"
        )
    n_terminal = n_path = 0
    if terminal_constraint is not None:
        name = "terminal_constraint(t, q, qd, p)"
        shape = _scalar_shape(name, terminal_constraint, t, zeros, zeros, p_u, expect="rows")
        n_terminal = shape[0] if shape else 1
    if path_constraint is not None:
        name = "path_constraint(t, q, qd, u, p)"
        shape = _scalar_shape(name, path_constraint, t, zeros, zeros, u, p_u, expect="rows")
        n_path = shape[0] if shape else 1
    return n_terminal, n_path


def _check_point_constraints(
    point_constraints, t0: float, t1: float, free_time: bool, zeros, nu: int, p_u
) -> tuple[tuple[float, ...], tuple[Callable, ...], tuple[int, ...]]:
    r"""`point_constraints`, a sequence of pairs `(t_i, c_i)`: each time finite and within
    $[t_0, t_1]$ of a fixed horizon, each $c_i$`(t, q, qd, u, p)` returning a scalar or rows
    `(k,)`; returns `(times, functions, row counts)`."""
    if point_constraints is None:
        return (), (), ()
    if callable(point_constraints) or not isinstance(point_constraints, tuple | list):
        raise TypeError(
            "`point_constraints` must be a sequence of pairs (t, c) with "
            "c(t, q, qd, u, p) -> (k,), e.g. [(1.0, lambda t, q, qd, u, p: q[0] - 1.0)]; "
            f"got {type(point_constraints).__name__}"
        )
    if point_constraints and free_time:
        raise ValueError(
            "`point_constraints` need a fixed final time: with `t1_bounds` the times of the "
            "grid move with t1, so a constraint at a time in seconds has no fixed node"
        )
    times, fns, counts = [], [], []
    u = jnp.zeros(nu, zeros.dtype)
    for i, item in enumerate(point_constraints):
        if not (isinstance(item, tuple | list) and len(item) == 2 and callable(item[1])):
            raise TypeError(
                f"`point_constraints[{i}]` must be a pair (t, c) with c(t, q, qd, u, p) -> "
                f"(k,), got {item!r}"
            )
        t, fn = item
        try:
            t = float(t)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"`point_constraints[{i}]`: the time must be a number, got {t!r}"
            ) from e
        if not (np.isfinite(t) and t0 <= t <= t1):
            raise ValueError(
                f"`point_constraints[{i}]`: the time {t} lies outside the horizon "
                f"[t0, t1] = [{t0}, {t1}]"
            )
        name = f"point_constraints[{i}] (t = {t:g}): c(t, q, qd, u, p)"
        shape = _scalar_shape(name, fn, jnp.asarray(t, zeros.dtype), zeros, zeros, u, p_u,
                              expect="rows")  # fmt: skip
        times.append(t)
        fns.append(fn)
        counts.append(shape[0] if shape else 1)
    return tuple(times), tuple(fns), tuple(counts)


def _parameter_bounds(parameters, params, parameter_bounds, dtype) -> tuple:
    """`(lower, upper)` of the flattened `parameters(params)`: scalars broadcast, pytrees
    like `parameters(params)` flattened, `None` unbounded."""
    if not callable(parameters):
        raise TypeError("`parameters` must be a function where(params) -> leaves")
    flat, _ = ravel_pytree(parameters(params))
    k = flat.shape[0]
    if parameter_bounds is None:
        return np.full(k, -_INF), np.full(k, _INF)
    if not (isinstance(parameter_bounds, tuple | list) and len(parameter_bounds) == 2):
        raise ValueError("`parameter_bounds` must be a pair (lower, upper)")
    sides = []
    for side, v in zip(("lower", "upper"), parameter_bounds, strict=True):
        if v is None or np.ndim(v) == 0:
            v = np.full(k, (-_INF if side == "lower" else _INF) if v is None else v)
        else:
            try:
                v = np.asarray(ravel_pytree(v)[0])
            except Exception as e:  # noqa: BLE001
                raise ValueError(f"`parameter_bounds`: {side} bound: {e}") from e
        if np.shape(v) != (k,):
            raise ValueError(
                f"`parameter_bounds`: the {side} bound must be a scalar or a pytree "
                f"like parameters(params) ({k} values), got {np.shape(v)}"
            )
        sides.append(v)
    return constant_bounds("parameter_bounds", tuple(sides), (k,), dtype)


def _check_fixed_within_bounds(states: dict, at_t0: dict, at_t1: dict) -> None:
    """Bounds on an initial/terminal value that is also fixed must contain it (the bounds
    at $t_0$ and at $t_1$)."""
    for name, key in (("q0", "q"), ("qd0", "qd"), ("q1", "q"), ("qd1", "qd")):
        x = states[name]
        if x is not None:
            lo, hi = (at_t0 if name.endswith("0") else at_t1)[key]
            lo, hi = lo.reshape(-1), hi.reshape(-1)
            bad = np.flatnonzero((np.asarray(x) < lo) | (np.asarray(x) > hi))
            if bad.size:
                raise ValueError(
                    f"`{name}`[{int(bad[0])}] = {float(x[bad[0]])} lies outside "
                    f"{key}_bounds [{lo[bad[0]]}, {hi[bad[0]]}]: the problem is infeasible"
                )


class OptimalControlProblem(eqx.Module):
    r"""A trajectory optimisation problem on a constrained `cx.System`.

    $$\min_{u(\cdot),\,p_\text{opt},\,t_1}\ \int_{t_0}^{t_1}\ell(t,q,\dot q,u,p)\,dt
    + \phi(t_1, q(t_1), \dot q(t_1), p)$$

    subject to the system's constrained dynamics, the initial state `(q0, qd0)` at
    $t_0$, the terminal state `(q1, qd1)` at $t_1$ where given,
    $\psi(t_1, q(t_1), \dot q(t_1), p) = 0$, $h(t, q, \dot q, u, p) \le 0$ along the
    path, and the bounds.

    **Arguments:**

    - `system`: a `cx.System` whose force reads the control from the parameters, e.g.
      `force=lambda t, q, qd, p: jnp.array([p["u"][0], 0.0])`.
    - `params`: the parameter pytree; its value at `control` is the control's initial
      value and fixes its shape `(nu,)`.
    - `control`: `where(params) -> array (nu,)` locating the control leaf.
    - `t1`: the final time (the initial guess of it when `t1_bounds` is given); `t0`.
    - `q0`, `qd0`: the fixed initial state `(n,)` (consistent with the constraints);
      `None` leaves it free.
    - `q1`, `qd1`: a fixed terminal state `(n,)`; `None` leaves it free.
    - `running_cost`: $\ell$`(t, q, qd, u, p) -> scalar` (default none).
    - `terminal_cost`: $\phi$`(t, q, qd, p) -> scalar`, evaluated at $t_1$ (e.g.
      `lambda t, q, qd, p: t` for minimum time).
    - `terminal_constraint`: $\psi$`(t, q, qd, p) -> (k,)`, imposed $= 0$ at $t_1$.
    - `path_constraint`: $h$`(t, q, qd, u, p) -> (k,)`, imposed $\le 0$ along the path.
    - `point_constraints`: pairs `(t_i, c_i)`, each $c_i$`(t, q, qd, u, p) -> (k,)`
      imposed $= 0$ at the time $t_i \in [t_0, t_1]$ (opty's "instance constraints"):
      waypoints, a state fixed in part at $t_0$ or $t_1$ (with `q0`/`q1` left `None`),
      a control's value at an instant. Each $t_i$ must be a node of the transcription's
      grid (`solve_optimal_control` names the nearest nodes where it is not); a fixed
      final time.
    - `control_bounds`, `q_bounds`, `qd_bounds`: `(lower, upper)`, each a scalar, an
      array of the variable's shape or `None` (unbounded); or a function
      `t -> (lower, upper)` of the time (a JAX function, evaluated at every node and
      midpoint of the transcription's grid; a fixed final time), for bounds that vary
      along the horizon.
    - `parameters`: `where(params) -> pytree of arrays` optimised together with the
      controls (default none); `parameter_bounds`: `(lower, upper)` pytrees of that
      structure (or scalars).
    - `t1_bounds`: `(lower, upper)` makes the final time a decision variable.
    - `mu0`: the vakonomic multipliers at $t_0$ `(m,)`; free if `None`.
    - `prescription`: `cx.DAlembert()` (default) or `cx.Vakonomic()`.
    - `constraint_solver`: `cx.KKT()` (default: second derivatives of its solve are the
      cheapest to compile) or a rank-robust `cx.AutoSolver()`/`cx.UdwadiaKalaba()` for
      motions through singular configurations.

    **Example:**

    ```python
    def force(t, q, qd, p):  # push along the heading, torque about the vertical
        return jnp.array([p["u"][0] * jnp.cos(q[2]), p["u"][0] * jnp.sin(q[2]), p["u"][1]])

    model = cx.models.knife_edge()
    system = cx.System(model.system.lagrangian, model.system.constraints, force=force)
    problem = cx.fit.OptimalControlProblem(
        system, {**model.params, "u": jnp.zeros(2)}, control=lambda p: p["u"], t1=5.0,
        q0=jnp.zeros(3), qd0=jnp.zeros(3), q1=jnp.array([0.0, 1.0, 0.0]), qd1=jnp.zeros(3),
        running_cost=lambda t, q, qd, u, p: u @ u)
    sol = cx.fit.solve_optimal_control(problem)
    ```
    """

    system: System
    params: Params
    control: Callable = eqx.field(static=True)
    t0: float = eqx.field(static=True)
    t1: Float[Array, ""]
    q0: Float[Array, " n"] | None
    qd0: Float[Array, " n"] | None
    q1: Float[Array, " n"] | None
    qd1: Float[Array, " n"] | None
    mu0: Float[Array, " m"] | None
    running_cost: Callable | None = eqx.field(static=True)
    terminal_cost: Callable | None = eqx.field(static=True)
    terminal_constraint: Callable | None = eqx.field(static=True)
    path_constraint: Callable | None = eqx.field(static=True)
    point_times: tuple[float, ...] = eqx.field(static=True)
    point_taus: tuple[float, ...] = eqx.field(static=True)  # (t_i - t0) / (t1 - t0)
    point_constraints: tuple[Callable, ...] = eqx.field(static=True)
    n_point: tuple[int, ...] = eqx.field(static=True)
    parameters: Callable | None = eqx.field(static=True)
    prescription: AbstractPrescription
    constraint_solver: AbstractConstraintSolver
    # Trace-time facts, static: sizes and the rows with a position level.
    n: int = eqx.field(static=True)
    nu: int = eqx.field(static=True)
    counts: tuple[int, ...] = eqx.field(static=True)
    mask: tuple[bool, ...] = eqx.field(static=True)
    row_names: tuple[str, ...] = eqx.field(static=True)
    n_terminal: int = eqx.field(static=True)
    n_path: int = eqx.field(static=True)
    free_time: bool = eqx.field(static=True)
    # Bounds `(lower, upper)` per variable kind (numpy, read by the NLP solver): the
    # constant ones; those given as functions of time in `bound_functions`.
    bounds: dict
    bound_functions: tuple[tuple[str, Callable], ...] = eqx.field(static=True)

    def __init__(
        self,
        system: System,
        params: Params,
        *,
        control: Callable,
        t1: float,
        t0: float = 0.0,
        q0: Float[ArrayLike, " n"] | None = None,
        qd0: Float[ArrayLike, " n"] | None = None,
        q1: Float[ArrayLike, " n"] | None = None,
        qd1: Float[ArrayLike, " n"] | None = None,
        running_cost: Callable | None = None,
        terminal_cost: Callable | None = None,
        terminal_constraint: Callable | None = None,
        path_constraint: Callable | None = None,
        point_constraints=(),
        control_bounds=None,
        q_bounds=None,
        qd_bounds=None,
        parameters: Callable | None = None,
        parameter_bounds=None,
        t1_bounds=None,
        mu0: Float[ArrayLike, " m"] | None = None,
        prescription: AbstractPrescription = DAlembert(),
        constraint_solver: AbstractConstraintSolver = KKT(),
    ):
        nu = _check_arguments(system, control, params, prescription, constraint_solver)
        states, n, dtype = _check_states(system, control, params, nu, t0, q0, qd0, q1, qd1)
        t0, t1, free_time, t1_range = _check_times(t0, t1, t1_bounds)
        zeros = jnp.zeros(n, dtype)
        p_u = eqx.tree_at(control, params, jnp.zeros(nu, dtype))
        t = jnp.asarray(t0, dtype)
        layout = row_layout(system, t, zeros, zeros, p_u)  # checks the force's shape too
        _check_control_enters_force(system, control, params, states, t0, t1, n, nu, dtype)
        mu0 = _check_mu0(mu0, prescription, sum(layout.counts), dtype)
        n_terminal, n_path = _check_functions(
            running_cost, terminal_cost, terminal_constraint, path_constraint, t, zeros, nu, p_u
        )
        point = _check_point_constraints(point_constraints, t0, t1, free_time, zeros, nu, p_u)
        bounds, functions = {"t1": t1_range}, {}
        for (key, name), value, size in zip(
            _BOUND_NAMES.items(), (control_bounds, q_bounds, qd_bounds), (nu, n, n), strict=True
        ):
            if callable(value):
                check_bound_function(name, value, t0, t1, free_time, (size,), dtype)
                functions[key] = value
                value = None  # the constant part: none
            bounds[key] = constant_bounds(name, value, (size,), dtype)
        if parameters is not None:
            bounds["parameters"] = _parameter_bounds(parameters, params, parameter_bounds, dtype)
        elif parameter_bounds is not None:
            raise ValueError("`parameter_bounds` needs `parameters=` (which leaves to optimise)")
        self.bounds, self.bound_functions = bounds, tuple(sorted(functions.items()))
        self.system = system
        self.params = params
        self.control = control
        self.t0 = t0
        self.t1 = jnp.asarray(t1, dtype)
        self.q0, self.qd0, self.q1, self.qd1 = (states[k] for k in ("q0", "qd0", "q1", "qd1"))
        self.mu0 = mu0
        self.running_cost = running_cost
        self.terminal_cost = terminal_cost
        self.terminal_constraint = terminal_constraint
        self.path_constraint = path_constraint
        self.point_times, self.point_constraints, self.n_point = point
        self.point_taus = tuple((t - t0) / (t1 - t0) for t in self.point_times)
        self.parameters = parameters
        self.prescription = prescription
        self.constraint_solver = constraint_solver
        self.n, self.nu = n, nu
        self.counts = tuple(layout.counts)
        self.mask = tuple(bool(v) for v in layout.mask)
        self.row_names = tuple(layout.names)
        self.n_terminal, self.n_path = n_terminal, n_path
        self.free_time = free_time
        _check_fixed_within_bounds(states, self.bounds_at([t0]), self.bounds_at([t1]))
        for when, qn, qdn, tt in (("initial", "q0", "qd0", t0), ("terminal", "q1", "qd1", t1)):
            self._check_consistent(when, states[qn], states[qdn], tt, p_u)

    # ------------------------------------------------------------------------------------
    @property
    def m(self) -> int:
        """Stacked constraint rows (velocity level)."""
        return sum(self.counts)

    @property
    def h(self) -> int:
        """Rows with a position level."""
        return sum(self.mask)

    @property
    def state_size(self) -> int:
        """$s$: $(q, \\dot q)$, and $\\mu$ under the vakonomic prescription."""
        return 2 * self.n + (self.m if self.prescription.multiplier_state else 0)

    def optimised_parameters(self, params: Params) -> Float[Array, " k"]:
        """The optimised parameters of `params`, flattened (empty without `parameters=`)."""
        if self.parameters is None:
            return jnp.zeros((0,), self.t1.dtype)
        return ravel_pytree(self.parameters(params))[0]

    def params_at(self, shared: Float[Array, " k"], u: Float[Array, " nu"]) -> Params:
        """The parameter pytree with the optimised parameters `shared` (flattened) and the
        control value `u` in place."""
        p = self.params
        if self.parameters is not None:
            unravel = ravel_pytree(self.parameters(p))[1]
            p = eqx.tree_at(self.parameters, p, unravel(shared))
        return eqx.tree_at(self.control, p, u)

    def manifold_rows(self, t, q, qd, p) -> Float[Array, " r"]:
        r"""$(g(t, q), c(t, q, \dot q))$: the position rows, then all velocity rows."""
        g = position_residual(self.system, t, q, p)
        c = stacked_residual(self.system, p)(t, q, qd)
        return jnp.concatenate([g, c])

    def bounds_at(self, ts) -> dict:
        """The bounds of the controls, coordinates and velocities at the times `ts`
        `(K,)`: `{"u": (lo, hi), "q": ..., "qd": ...}`, each array `(K, size)`, the
        tightest of the constant bound and the function of time."""
        ts = np.atleast_1d(np.asarray(ts, np.float64))
        functions = dict(self.bound_functions)
        out = {}
        for k, name in _BOUND_NAMES.items():
            lo, hi = (np.broadcast_to(b, (ts.shape[0], *b.shape)) for b in self.bounds[k])
            if k in functions:
                f_lo, f_hi = bounds_along(name, functions[k], ts, lo.shape[1:], self.t1.dtype)
                lo, hi = np.maximum(lo, f_lo), np.minimum(hi, f_hi)
            out[k] = (lo, hi)
        return out

    def manifold_names(self) -> list[str]:
        """Names of `manifold_rows`: `position:name[i]`, then each row's `name[i]`."""
        pos = [f"position:{nm}" for nm, k in zip(self.row_names, self.mask, strict=True) if k]
        return pos + list(self.row_names)

    def _check_consistent(self, when, q, qd, t, p) -> None:
        if q is None or qd is None or not self.system.constraints:
            return
        t = jnp.asarray(t, q.dtype)
        r = np.asarray(self.manifold_rows(t, q, qd, p))
        tol = initial_tolerance(q.dtype) * (1.0 + float(jnp.max(jnp.abs(qd))))
        bad = np.flatnonzero(np.abs(r) > tol)
        if bad.size:
            names = self.manifold_names()
            rows = ", ".join(f"{names[i]} = {r[i]:.3g}" for i in bad[:5])
            raise ValueError(
                f"the {when} state violates the constraint rows: {rows} (tolerance {tol:.1e}); "
                "project it with cx.consistent_initial_state, or leave it free (None)"
            )
