r"""`simulate_contacts`: integrate a system with `FrictionalContact`s, each rolling,
sliding or separated as friction, the normal reaction and the gap decide, switching at
events located by root finding.

The run is a sequence of segments. In a segment every contact keeps its mode, and the
system is an ordinary constrained system: the rows of the rolling contacts, the normal rows
of the sliding ones and the system's own constraints, with the kinetic friction forces of
the sliding contacts (the separated ones have no rows). A segment ends where, for some
contact $i$, the *event function*

$$
\phi_i = \begin{cases}
\mu_{s,i}N_i - |\lambda_{t,i}| & \text{rolling (leaves the static friction cone)}\\
s_i\cdot a_i - \cot 60^\circ|s_{i,\perp}| & \text{sliding (the slip vanishes, or turns by }
60^\circ \text{ from its initial direction } a_i)\\
g_i - \delta + \tau\max(\dot g_i, 0) & \text{separated (the gap closes)}
\end{cases}
$$

or, in contact, the normal reaction $N_i$ crosses zero from above (lift-off): diffrax's
`Event` finds the first sign change of $\min_i\min(\phi_i, N_i)$ and an
`cx.Chandrupatla` root find on the step's dense output locates it (a bracketing method:
the dynamics' derivative is not traced into the forward run, and a kink of the event
function within the step cannot stall it; superlinear where the function is smooth, 9 to 11
evaluations of the dynamics where bisection took 32 to 35). The state is carried
across unchanged (at a touchdown, the velocities jump by the impact's impulse,
`_impact`), the contact's mode switched, and the next segment starts there. The
event time is a differentiable function of the parameters and of the initial state (the
implicit function theorem on $\phi(t^*) = 0$, as diffrax differentiates its events), so
`jax.grad` through the whole run includes the sensitivity of every switching time.

The steps, one module each: the dynamics of a mode assignment and its event functions
(`_mode_dynamics`, where the kinetic friction is solved for exactly), the rules of a
switch (`_mode_switch`), the run over the segments (`_contact_run`), its result
(`_contact_trajectory`) and its verdicts (`_run_checks`); here the arguments and the
initial state are checked and the run's status raised.
"""

import itertools
from collections.abc import Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, ArrayLike, Float

from ..._checks import _concrete_float
from ..._guards import attach_check
from ..._initial_state import check_initial_state
from ..._layout import row_layout
from ..._root_finder import Chandrupatla
from ..._stabilisation import Projection
from ..._state_length import length_mismatch_error
from ..._system import System
from ..._tolerances import initial_tolerance as default_initial_tolerance
from ._contact_checks import check_contacts
from ._contact_run import _run_jit, _Static, capacity, trimmed
from ._contact_trajectory import OK, ContactTrajectory
from ._frictional_contact import FrictionalContact, mode_code
from ._run_checks import _check_coefficients, _error_index, _messages, _raise_eager

DEFAULT_STABILISATION = Projection(alpha=10.0, beta=0.0)
"""What `stabilisation=` defaults to in `simulate_contacts`."""


class _Default:
    def __repr__(self) -> str:
        return f"cx.{DEFAULT_STABILISATION!r}"


_DEFAULT = _Default()


def _check_state(x, name: str) -> Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    if x.ndim != 1:
        raise ValueError(f"`{name}` must be a 1-D array (n,), got shape {x.shape}")
    # A non-finite entry, named with its index before anything compiles where the values
    # are concrete (a parameter's is named by the check of the quantity it is).
    if not isinstance(x, jax.core.Tracer):
        bad = ~np.isfinite(np.asarray(x))
        if np.any(bad):
            raise ValueError(
                f"cx.rigid.simulate_contacts: `{name}` has non-finite entries (at "
                f"{np.argwhere(bad).tolist()[:5]}: {np.asarray(x)[bad][:5].tolist()}); the "
                "run needs a finite initial state"
            )
    return x


def _check_arguments(system, contacts, modes, max_switches, stabilisation) -> tuple:
    """The system, the contacts (unique names), one mode per contact, the switch budget
    and the stabilisation; returns the contacts as a tuple, the mode codes and the
    stabilisation (the default filled in)."""
    if not isinstance(system, System):
        raise TypeError(f"`system` must be a cx.System, got {type(system).__name__}")
    if isinstance(contacts, FrictionalContact):
        contacts = [contacts]
    contacts = tuple(contacts)
    if not contacts:
        raise ValueError("`contacts` must hold at least one cx.rigid.FrictionalContact")
    for i, c in enumerate(contacts):
        if not isinstance(c, FrictionalContact):
            label = getattr(c, "name", None)
            raise TypeError(
                f"`contacts[{i}]` must be a cx.rigid.FrictionalContact (a contact with its "
                f"normal row and friction), got {type(c).__name__}"
                + (f" {label!r}" if label else "")
                + ": build it with cx.rigid.FrictionalContact(body, shape, plane, "
                "static_friction=..., kinetic_friction=...); rolling or no-slip rows of "
                "the same contact do not belong in `system`"
            )
    names = [c.name for c in contacts]
    if len(set(names)) != len(names):
        raise ValueError(f"contact names must be unique (pass name=...), got {names}")
    for i, j in itertools.combinations(range(len(contacts)), 2):
        if contacts[i].same_pair(contacts[j]):
            raise ValueError(
                f"contacts {names[i]!r} and {names[j]!r} are between the same two bodies "
                "(a body and its carrier's plane): give one FrictionalContact per pair"
            )
    if isinstance(modes, str):
        modes = [modes]
    modes = tuple(modes)
    if len(modes) != len(contacts):
        raise ValueError(
            f"`modes` must give one mode per contact ({len(contacts)}: {names}), got {modes}"
        )
    codes = [mode_code(m, f"`modes` of contact {n!r}") for m, n in zip(modes, names, strict=True)]
    if not isinstance(max_switches, (int, np.integer)) or max_switches < 0:
        raise ValueError(f"`max_switches` must be a non-negative int, got {max_switches!r}")
    if stabilisation is _DEFAULT:
        stabilisation = DEFAULT_STABILISATION
    if isinstance(stabilisation, Projection) and float(stabilisation.beta) != 0.0:
        raise ValueError(
            "simulate_contacts: `stabilisation` must be cx.Projection(alpha, beta=0.0), "
            f"cx.Baumgarte(...) or None, got beta={stabilisation.beta}"
        )
    return contacts, codes, stabilisation


def _check_states_and_times(system, q0, qd0, p, t0, t1, ts) -> tuple:
    """The initial state `(n,)` (floats, of one length), `t1 > t0` and the save times
    (default `[t0, t1]`), non-decreasing within `[t0, t1]`, checked where concrete;
    returns `(q0, qd0, t0, t1, ts)` as arrays of the state's dtype."""
    q0 = _check_state(q0, "q0")
    qd0 = _check_state(qd0, "qd0")
    if qd0.shape != q0.shape:
        raise length_mismatch_error(
            system, t0, {"q0": q0, "qd0": qd0.astype(q0.dtype)}, p, "cx.rigid.simulate_contacts"
        )
    dtype = q0.dtype
    t0a, t1a = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
    # The values of t0 and t1 where concrete (under `jit` a Python number stays one, but
    # `jnp.asarray` of it may be traced).
    t0v, t1v = _concrete_float(t0), _concrete_float(t1)
    if t0v is not None and t1v is not None and not t1v > t0v:
        raise ValueError(f"`t1` must be greater than `t0`, got t0={t0}, t1={t1}")
    ts = jnp.stack([t0a, t1a]) if ts is None else jnp.asarray(ts, dtype)
    if ts.ndim != 1 or ts.shape[0] == 0:
        raise ValueError(f"`ts` must be a non-empty 1-D array of save times, got shape {ts.shape}")
    if not isinstance(ts, jax.core.Tracer) and t0v is not None and t1v is not None:
        t_np = np.asarray(ts)
        if np.any(np.diff(t_np) < 0) or t_np[0] < t0v or t_np[-1] > t1v:
            raise ValueError(f"`ts` must be non-decreasing and within [t0, t1], got {t_np}")
    return q0, qd0, t0a, t1a, ts


def _diffrax_options(
    dtype, stabilisation, dt0, solver, stepsize_controller, root_finder, adjoint, max_steps
) -> dict:
    """The options of each segment's `diffrax.diffeqsolve`, the defaults filled in
    (`simulate_contacts`' docstring): the step capped by the stabilisation's fastest
    rate, as in `cx.simulate`."""
    eps = float(jnp.finfo(dtype).eps)
    if solver is None:
        solver = diffrax.Tsit5()
    if stepsize_controller is None:
        tol = max(1e-8, 100 * eps)
        rate = stabilisation.fastest_rate() if stabilisation is not None else 0.0
        dtmax = 1.0 / rate if rate > 0 else None
        stepsize_controller = diffrax.PIDController(rtol=tol, atol=tol, dtmax=dtmax)
    if root_finder is None:
        tol = max(1e-10, 100 * eps)
        root_finder = Chandrupatla(rtol=tol, atol=tol)
    if adjoint is None:
        adjoint = diffrax.RecursiveCheckpointAdjoint()
    return dict(
        dt0=dt0,
        solver=solver,
        stepsize_controller=stepsize_controller,
        root_finder=root_finder,
        adjoint=adjoint,
        max_steps=int(max_steps),
    )


def _check_initial_state(system, contacts, codes, t0, q0, qd0, p, initial_tolerance) -> Array:
    """The initial state against the rows at $t_0$ (docs page "Stabilisation"): the
    shapes of the system's functions first (their errors name the coordinates), the
    contacts' own rows in their initial modes and their shapes' radii, then the system's
    own rows (e.g. an orientation constraint), with the same rules. The friction cone and
    the normal reaction are checked inside the run (`_run_checks`)."""
    row_layout(system, t0, q0, qd0, p)  # the shapes, named, before anything compiles
    tolerance = None if initial_tolerance is None else float(initial_tolerance)
    q0 = check_contacts(contacts, codes, t0, q0, qd0, p, tolerance, _WHERE)
    if initial_tolerance is not None and system.constraints:
        values = jax.lax.stop_gradient((q0, qd0, p))  # what the check reads
        concrete = not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(values))
        check = _system_rows_jit if concrete else _system_rows
        q0 = check(system, t0, q0, qd0, p, tolerance)
    return q0


_WHERE = "cx.rigid.simulate_contacts"


def _system_rows(system, t0, q0, qd0, p, tolerance) -> Array:
    """`q0`, or an error naming the system's own row that the initial state violates."""
    layout = row_layout(system, t0, q0, qd0, p)
    return check_initial_state(
        system, None, layout, t0, q0, qd0, None, p, tolerance, False, where=_WHERE
    )


# Eagerly one small program, not an operation at a time (`_contact_checks`).
_system_rows_jit = eqx.filter_jit(_system_rows)


def _throw(out: ContactTrajectory, contacts, max_switches: int) -> ContactTrajectory:
    """Raise the error of a status that is not ok: eagerly where the status is concrete,
    else through `equinox`'s runtime checks on the result's arrays."""
    if not isinstance(out.status, jax.core.Tracer):
        _raise_eager(out, contacts, max_switches)
        return out
    pred = out.status != OK
    index = _error_index(out, len(contacts))
    msgs = _messages(contacts, max_switches)
    q, qd, qf, qdf, tf, sw = attach_check(
        (out.q, out.qd, out.q_final, out.qd_final, out.t_final, out.switch_times), pred, index, msgs
    )
    return eqx.tree_at(
        lambda o: (o.q, o.qd, o.q_final, o.qd_final, o.t_final, o.switch_times),
        out,
        (q, qd, qf, qdf, tf, sw),
    )


def simulate_contacts(
    system: System,
    contacts: Sequence[FrictionalContact],
    q0: Float[ArrayLike, " n"],
    qd0: Float[ArrayLike, " n"],
    p=None,
    *,
    modes: Sequence[str],
    t0: float = 0.0,
    t1: float,
    ts: Float[ArrayLike, " k"] | None = None,
    dt0: float | None = None,
    solver: diffrax.AbstractSolver | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    root_finder: optx.AbstractRootFinder | None = None,
    adjoint: diffrax.AbstractAdjoint | None = None,
    stabilisation=_DEFAULT,
    initial_tolerance=_DEFAULT,
    max_switches: int = 16,
    max_steps: int = 4096,
    tolerance: float | None = None,
    throw: bool = True,
) -> ContactTrajectory:
    r"""Integrate `system` with frictional contacts that switch between rolling, sliding
    and separated where Coulomb friction, the normal reaction and the gap decide (Loparo &
    Vakalis 2002, §7.9).

    Each contact is *rolling* (its no-slip rows are constraints, their multipliers the
    friction force $\lambda_t$), *sliding* (kinetic friction $-\mu_k N\hat s$ at the
    contact point, $N$ the normal reaction) or *separated* (no rows: free flight). Rolling
    turns to sliding where $|\lambda_t| = \mu_s N$ (leaving the static friction cone),
    sliding to rolling where the slip velocity vanishes — unless rolling would then leave
    the cone at once, and the slip reverses. A contact whose normal reaction vanishes
    separates; where a separated contact's gap closes, an impact (Newton's restitution
    law with a Coulomb-bounded impulse) makes it bounce, roll or slide. The switching
    times are located by root finding on diffrax's dense output (`diffrax.Event`), the
    state carried across unchanged; `jax.grad` of anything computed from the result
    passes through the switching times (the implicit function theorem on the event
    condition). Docs page "Rolling or sliding".

    **Arguments:**

    - `system`: a `cx.System` *without* the contacts: its Lagrangian, its other
      constraints (e.g. `body.orientation_constraint()`) and its force.
    - `contacts`: `cx.rigid.FrictionalContact`s; their rows come first in each segment's
      system.
    - `q0`, `qd0`, `p`: initial state `(n,)` and parameters (any pytree).
    - `modes`: the initial mode of each contact, `"rolling"`, `"sliding"` or
      `"separated"`. A state inconsistent with its mode is refused (a rolling contact that
      slips or needs more friction than $\mu_s N$, a sliding one that does not slip, a
      contact in either without a positive normal reaction; a separated one below the
      plane, or on it and moving into it).
    - `t0`, `t1`, `ts`: time span and save times `(k,)` (default `[t0, t1]`).
    - `dt0`, `solver` (`diffrax.Tsit5()`), `stepsize_controller` (a `PIDController` with
      `rtol = atol =` $10^{-8}$ in float64, steps capped by the stabilisation's rate as
      in `cx.simulate`), `adjoint` (`RecursiveCheckpointAdjoint()`), `max_steps` (per
      segment): passed to `diffrax.diffeqsolve`.
    - `root_finder`: locates the switches (default `cx.Chandrupatla` with
      `rtol = atol =` $10^{-10}$ in float64, Chandrupatla's bracketing method, which
      stops on the width of the bracket; any `optimistix` root finder that takes the
      step as `options=dict(lower, upper)`, such as
      `optimistix.Bisection(rtol, atol, flip=True)`: every event function falls through
      zero; bisection's `atol` bounds the event function's value at the root too, in its
      own units).
    - `stabilisation`: `cx.Projection(alpha=10.0, beta=0.0)` (default), `cx.Baumgarte`
      or `None` (none); a `Projection` with `beta != 0` is refused (the friction is evaluated at
      the projected velocity, which its position correction would not be).
    - `initial_tolerance`: the largest violation of `system`'s own constraint rows accepted
      at `t0` (absolute on holonomic rows, relative to $\max(1, |\dot q|_\infty)$ on
      velocity rows; default `1e-8`, or `1000 * eps` of the dtype where that is larger), as
      in `cx.simulate`; `None` skips the check. Project a state first with
      `cx.consistent_initial_state(system, ...)`.
    - `max_switches`: the budget of segment boundaries (a sliding contact re-anchoring
      its slip direction counts too); exceeding it raises (a Zeno sequence). It is
      run-time data within a capacity (the next power of two from 16), like the number of
      save times: a new budget or number of save times within them does not recompile.
    - `tolerance`: relative tolerance of "the slip is zero" (default
      $\max(10^{-8}, 1000\epsilon)$).
    - `throw`: raise on an impact without a consistent impulse, an exhausted budget, a
      failed integration or an
      inconsistent initial state (eagerly a `ValueError`/`RuntimeError` with the contact
      and the time; under `jit`/`grad` an `equinox` runtime error naming the contact).
      With `False` read `ContactTrajectory.status`.

    **Returns:** a `ContactTrajectory`.

    **Example:** a ball launched without spin skids, then rolls.

    ```python
    ball = cx.rigid.RigidBody(1.0, jnp.full(3, 0.004), name="ball")
    L = lambda t, q, qd, p: ball.kinetic_energy(q, qd) - 9.81 * q[2]
    system = cx.System(L, [ball.orientation_constraint()])
    contact = cx.rigid.FrictionalContact(ball, cx.rigid.Sphere(0.1),
                                         static_friction=0.3, kinetic_friction=0.2)
    q0, qd0 = ball.state(jnp.array([0, 0, 0.1]), jnp.eye(3), jnp.array([1.0, 0, 0]), jnp.zeros(3))
    out = cx.rigid.simulate_contacts(system, [contact], q0, qd0, modes=["sliding"], t1=1.0)
    out.switch_times[0]   # 2 v0 / (7 mu_k g) = 0.1456...
    ```
    """
    contacts, codes, stabilisation = _check_arguments(
        system, contacts, modes, max_switches, stabilisation
    )
    q0, qd0, t0a, t1a, ts = _check_states_and_times(system, q0, qd0, p, t0, t1, ts)
    dtype = q0.dtype
    options = _diffrax_options(
        dtype, stabilisation, dt0, solver, stepsize_controller, root_finder, adjoint, max_steps
    )
    if tolerance is None:
        tolerance = max(1e-8, 1000 * float(jnp.finfo(dtype).eps))
    p = jax.tree.map(lambda x: jnp.asarray(x, dtype) if isinstance(x, float) else x, p)
    _check_coefficients(contacts, p)
    if initial_tolerance is _DEFAULT:
        initial_tolerance = default_initial_tolerance(dtype)
    q0 = _check_initial_state(system, contacts, codes, t0a, q0, qd0, p, initial_tolerance)
    # Shapes of capacities, the budget as data: a new number of save times or a new
    # budget within them runs the compiled program again (`_contact_run`).
    k, S = ts.shape[0], int(max_switches)
    ts_padded = jnp.concatenate([ts, jnp.broadcast_to(ts[-1], (capacity(k) - k,))])
    out = _run_jit(
        _Static(system, stabilisation),
        contacts,
        jnp.asarray(codes, jnp.int32),
        t0a,
        t1a,
        q0,
        qd0,
        p,
        ts_padded,
        **options,
        max_switches=jnp.asarray(S, jnp.int32),
        capacity=capacity(S),
        tolerance=float(tolerance),
    )
    out = trimmed(out, k, S)
    return _throw(out, contacts, max_switches) if throw else out
