r"""`simulate_contacts`: integrate a system with `FrictionalContact`s, each rolling or
sliding as friction decides, switching at events located by root finding.

The run is a sequence of segments. In a segment every contact keeps its mode, and the
system is an ordinary constrained system: the rows of the rolling contacts, the normal rows
of the sliding ones and the system's own constraints, with the kinetic friction forces of
the sliding contacts. A segment ends where, for some contact $i$, the *event function*

$$
\phi_i = \begin{cases}
\mu_{s,i}N_i - |\lambda_{t,i}| & \text{rolling (leaves the static friction cone)}\\
s_i\cdot a_i & \text{sliding (the slip velocity along its initial direction } a_i
\text{ reaches zero)}
\end{cases}
$$

or the normal reaction $N_i$ crosses zero from above (lift-off, an error): diffrax's
`Event` finds the first sign change of $\min_i\min(\phi_i, N_i)$ and an
`optimistix.Newton` root find on the step's dense output locates it. The state is carried
across unchanged, the contact's mode switched, and the next segment starts there. The
event time is a differentiable function of the parameters and of the initial state (the
implicit function theorem on $\phi(t^*) = 0$, as diffrax differentiates its events), so
`jax.grad` through the whole run includes the sensitivity of every switching time.

The kinetic friction force depends on the normal reaction, $Q = N\,d(q, \dot q)$ with
$d = -\mu_k(\partial v_c/\partial\dot q)^\top\hat s$, and the reaction depends on the
force. The saddle system with the force is linear in $N$: with $(\ddot q_0, \lambda_0)$
the solution without friction and $(X, Y)$ that of $W X - A^\top Y = D$, $A X = 0$ (the
columns of $D$ the $d$ of the sliding contacts), the normal reactions are the solution of
$N = \lambda_{0,n} + Y_n N$, and then $\ddot q = \ddot q_0 + XN$ — exact, no iteration
(a singular $I - Y_n$ is Painlevé's paradox, where Coulomb friction has no consistent
solution).
"""

from collections.abc import Sequence
from typing import NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from ..._guards import attach_check
from ..._initial_state import check_initial_state
from ..._layout import row_layout
from ..._stabilisation import Projection
from ..._state_length import length_mismatch_error
from ..._tolerances import initial_tolerance as default_initial_tolerance
from .._kinematics._so3 import safe_rsqrt, safe_sqrt
from . import _engine as cx
from ._contact_checks import check_contacts
from ._contacts import _param
from ._frictional_contact import MODES, ROLLING, SLIDING, FrictionalContact, mode_code

# Status codes of a run (`ContactTrajectory.status`).
OK, LIFT_OFF, ZENO, FAILED, INCONSISTENT = 0, 1, 2, 3, 4
_STATUS = ("ok", "lift-off", "switch budget exhausted", "integration failed", "inconsistent start")

# Per-contact codes of the initial checks (`ContactTrajectory.initial_check`).
_INIT_OK = 0
_INIT_CODES = (
    None,
    "needs a finite `static_friction` mu_s >= 0",
    "needs a finite `kinetic_friction` mu_k >= 0",
    "needs `static_friction` mu_s >= `kinetic_friction` mu_k",
    "is declared 'rolling' but its contact point slips: declare it 'sliding', or start from "
    "a state that satisfies the rolling rows",
    "is declared 'rolling' but rolling needs a friction force outside the static friction "
    "cone |lambda_t| <= mu_s N: declare it 'sliding'",
    "is declared 'sliding' but its slip velocity is zero: declare it 'rolling' (it slides "
    "at once if friction cannot hold it)",
    "has no positive normal reaction at t0 (the body is not pressed onto the plane: it "
    "would lift off)",
    "has a shape whose radius is not finite and > 0",
)
# The order in which the initial checks are made (the first failed one is reported).
_INIT_ORDER = (8, 1, 2, 3, 4, 5, 6, 7)


def _unit(v) -> Array:
    """`v/|v|`, the zero vector at zero (finite derivatives)."""
    return v * safe_rsqrt(v @ v)


def _norm(v) -> Array:
    return safe_sqrt(jnp.sum(v * v, axis=-1))


def _smallest(x: Array) -> Array:
    """The smallest entry of `x`, differentiated through the entry that attains it.

    Not `jnp.min`: its derivative averages the tangents of the entries equal to the minimum,
    an equality XLA may test on values it recomputed in two fusions, differently rounded;
    where the two tests disagree it divides by a zero count, and the event's Newton root
    find, given an infinite derivative, stops at the end of the step instead of at the
    switch (seen at XLA's optimisation level 0 on CPU). An index has no such test.
    """
    x = jnp.ravel(x)
    return x[jnp.argmin(x)]


def _combos(n: int) -> list[tuple[int, ...]]:
    """Every assignment of modes to `n` contacts; combo `i` gives contact `j` mode bit `j`."""
    return [tuple((i >> j) & 1 for j in range(n)) for i in range(2**n)]


class _Eval(NamedTuple):
    """The dynamics of one mode assignment at one state."""

    q_dot: Array  # (n,) time derivative of q (the projected velocity under Projection)
    qdd: Array  # (n,)
    normal: Array  # (N,) normal reactions
    tangential: Array  # (N, 3) tangential reaction (spatial; zero while sliding)
    slip: Array  # (N, 3) slip velocities
    scale: Array  # (N,) slip speed scales


class _Model(eqx.Module):
    """The system, its contacts and the stabilisation: evaluates any mode assignment."""

    system: "cx.System" = eqx.field(static=True)
    contacts: tuple[FrictionalContact, ...]
    stabilisation: object

    def combo_system(self, combo) -> "cx.System":
        rows = []
        for contact, m in zip(self.contacts, combo, strict=True):
            rows.extend(contact.constraints(MODES[m]))
        return cx.System(
            self.system.lagrangian,
            [*rows, *self.system.constraints],
            self.system.force,
            dynamics=self.system.dynamics,
        )

    def evaluate_combo(self, combo, t, q, qd, p, anchors) -> _Eval:
        system = self.combo_system(combo)
        rows = [c.num_rows(MODES[m]) for c, m in zip(self.contacts, combo, strict=True)]
        offsets = np.cumsum([0, *rows])
        out = cx.accelerations(system, t, q, qd, p, stabilisation=self.stabilisation)
        qd_u, qdd, lam = out.velocity, out.qdd, out.multipliers
        sliding = [i for i, m in enumerate(combo) if m == SLIDING]
        if sliding:
            # Kinetic friction Q = sum_i N_i d_i, with N_i the normal multipliers: the
            # saddle system is linear in N (module docstring).
            D = jnp.stack(
                [
                    self.contacts[i].kinetic_friction_force(t, q, qd_u, p, anchors[i])
                    for i in sliding
                ],
                axis=1,
            )
            W = cx.mass_matrix(system, t, q, qd_u, p)
            A = cx.constraint_jacobian(system, t, q, qd_u, p)
            n, m = W.shape[0], A.shape[0]
            K = jnp.block([[W, -A.T], [A, jnp.zeros((m, m), W.dtype)]])
            Z = jnp.linalg.solve(K, jnp.concatenate([D, jnp.zeros((m, len(sliding)), D.dtype)]))
            X, Y = Z[:n], Z[n:]
            normal_rows = np.asarray([offsets[i] for i in sliding])
            N = jnp.linalg.solve(
                jnp.eye(len(sliding), dtype=W.dtype) - Y[normal_rows], lam[normal_rows]
            )
            qdd = qdd + X @ N
            lam = lam + Y @ N
        normal = jnp.stack([lam[offsets[i]] for i in range(len(self.contacts))])
        tangential = []
        for i, (contact, m) in enumerate(zip(self.contacts, combo, strict=True)):
            if m == ROLLING:
                tangents = contact.plane.tangents().astype(q.dtype)
                tangential.append(lam[offsets[i] + 1 : offsets[i] + 3] @ tangents)
            else:
                tangential.append(jnp.zeros(3, q.dtype))
        slip = jnp.stack([c.slip_velocity(t, q, qd_u, p) for c in self.contacts])
        scale = jnp.stack([c.speed_scale(t, q, qd_u, p) for c in self.contacts])
        return _Eval(out.velocity, qdd, normal, jnp.stack(tangential), slip, scale)

    def evaluate(self, modes, t, q, qd, p, anchors) -> _Eval:
        combos = _combos(len(self.contacts))
        index = jnp.sum(modes * (2 ** jnp.arange(len(self.contacts))))
        branches = [(lambda c: lambda *a: self.evaluate_combo(c, *a))(combo) for combo in combos]
        return jax.lax.switch(index, branches, t, q, qd, p, anchors)

    def event_value(self, modes, t, q, qd, p, anchors) -> Array:
        r"""The event function of a segment, $\min_i\min(\phi_i, N_i)$ (module docstring);
        its time derivative is what the root find's Newton steps divide by."""
        ev = self.evaluate(modes, t, q, qd, p, anchors)
        return _smallest(self.conditions(modes, ev, anchors, p))

    def static_friction(self, p) -> Array:
        return jnp.stack([c.coefficients(p)[0] for c in self.contacts])

    def conditions(self, modes, ev: _Eval, anchors, p) -> Array:
        r"""`(N, 2)`: per contact the mode's event function $\phi_i$ and the normal
        reaction $N_i$; each positive while the mode holds."""
        cone = self.static_friction(p) * ev.normal - _norm(ev.tangential)
        along = jnp.sum(ev.slip * anchors, axis=-1)
        return jnp.stack([jnp.where(modes == ROLLING, cone, along), ev.normal], axis=1)


class ContactTrajectory(eqx.Module):
    r"""The result of `simulate_contacts`.

    - `ts` `(k,)`, `q`, `qd` `(k, n)`: the state at the requested save times; `modes`
      `(k, N)`: each contact's mode there (0 rolling, 1 sliding; names in `mode_names`).
      Times after a run that stopped early hold `inf`.
    - `t_final`, `q_final`, `qd_final`: where the run ended (`t1` unless it stopped).
    - `switch_times` `(S,)`, `switch_contacts` `(S,)`, `switch_modes` `(S, N)`: every
      segment boundary in order — its time, the contact whose event fired and the modes
      after it — padded with `inf`, `-1` and the last modes up to `S = max_switches`.
      A sliding contact whose slip turned by more than 90° without vanishing re-anchors
      its slip direction: a boundary at which the modes stay the same.
    - `num_switches`: the number of boundaries.
    - `status`: 0 ok, 1 lift-off, 2 switch budget exhausted, 3 integration failed,
      4 inconsistent initial state; `failed_contact` and `failed_time` say where.
    - `initial_check` `(N,)`: per contact, 0 or the code of the failed initial check.

    With `throw=True` (the default) `simulate_contacts` raises on every status but 0.
    """

    ts: Float[Array, " k"]
    q: Float[Array, "k n"]
    qd: Float[Array, "k n"]
    modes: Int[Array, "k N"]
    t_final: Float[Array, ""]
    q_final: Float[Array, " n"]
    qd_final: Float[Array, " n"]
    switch_times: Float[Array, " S"]
    switch_contacts: Int[Array, " S"]
    switch_modes: Int[Array, "S N"]
    num_switches: Int[Array, ""]
    status: Int[Array, ""]
    failed_contact: Int[Array, ""]
    failed_time: Float[Array, ""]
    initial_check: Int[Array, " N"]
    system: "cx.System" = eqx.field(static=True)
    # The contacts, split into their arrays and the rest (callables, names: static), so
    # that a `ContactTrajectory` can be returned from `jax.jit`; `contacts` joins them.
    contact_arrays: tuple
    contact_statics: tuple = eqx.field(static=True)
    p: object
    contact_names: tuple[str, ...] = eqx.field(static=True)
    mode_names: tuple[str, ...] = eqx.field(static=True, default=MODES)

    @property
    def contacts(self) -> tuple[FrictionalContact, ...]:
        """The `FrictionalContact`s of the run."""
        return eqx.combine(self.contact_arrays, self.contact_statics)

    @property
    def completed(self) -> Bool[Array, ""]:
        """Whether the run reached `t1`."""
        return self.status == OK

    def energy(self) -> Float[Array, " k"]:
        r"""$E = \dot q\cdot\partial L/\partial\dot q - L$ at the save times."""
        return jax.vmap(lambda t, q, qd: cx.energy(self.system, t, q, qd, self.p))(
            self.ts, self.q, self.qd
        )

    def slip_speed(self) -> Float[Array, "k N"]:
        """$|s|$ of every contact at the save times."""

        def one(t, q, qd):
            return jnp.stack([_norm(c.slip_velocity(t, q, qd, self.p)) for c in self.contacts])

        return jax.vmap(one)(self.ts, self.q, self.qd)


def _initial_codes(model: _Model, modes, t, q, qd, p, tolerance) -> tuple[Array, Array]:
    """Per-contact code of the first failed initial check (0: consistent), the initial
    slip anchors, and the scale of the normal reactions."""
    slip = jnp.stack([c.slip_velocity(t, q, qd, p) for c in model.contacts])
    scale = jnp.stack([c.speed_scale(t, q, qd, p) for c in model.contacts])
    anchors = jax.vmap(_unit)(slip)
    ev = model.evaluate(modes, t, q, qd, p, anchors)
    coefficients = [c.coefficients(p) for c in model.contacts]
    mu_s = jnp.stack([m[0] for m in coefficients])
    mu_k = jnp.stack([m[1] for m in coefficients])
    slipping = _norm(slip) > tolerance * (1.0 + scale)
    cone = mu_s * ev.normal - _norm(ev.tangential)
    radius = jnp.stack([jnp.asarray(_param(c.shape.radius, p), q.dtype) for c in model.contacts])
    checks = [
        ~(jnp.isfinite(mu_s) & (mu_s >= 0)),
        ~(jnp.isfinite(mu_k) & (mu_k >= 0)),
        mu_s < mu_k,
        (modes == ROLLING) & slipping,
        (modes == ROLLING) & (cone < -tolerance * (1.0 + jnp.abs(ev.normal))),
        (modes == SLIDING) & ~slipping,
        ~(ev.normal > 0),
        ~(jnp.isfinite(radius) & (radius > 0)),
    ]
    code = jnp.zeros(len(model.contacts), jnp.int32)
    for k in reversed(_INIT_ORDER):
        code = jnp.where(checks[k - 1], k, code)
    return code, anchors, jnp.max(jnp.abs(ev.normal)) + jnp.finfo(q.dtype).tiny


class _Static:
    """The system and the stabilisation, a key for `filter_jit` (compared by value). The
    contacts travel as an argument: their arrays (friction coefficients, a plane's normal,
    a body's mass) are traced, the rest is static."""

    def __init__(self, system, stabilisation):
        self.parts = (system, stabilisation)

    def __hash__(self):
        return hash(self.parts)

    def __eq__(self, other):
        return isinstance(other, _Static) and self.parts == other.parts


def _run(
    static: _Static,
    contacts,
    modes0,
    t0,
    t1,
    q0,
    qd0,
    p,
    ts,
    *,
    dt0,
    solver,
    stepsize_controller,
    root_finder,
    adjoint,
    max_switches: int,
    max_steps: int,
    tolerance: float,
) -> ContactTrajectory:
    system, stabilisation = static.parts
    model = _Model(system, contacts, stabilisation)
    N = len(model.contacts)
    dtype = q0.dtype
    codes, anchors0, normal_scale = _initial_codes(model, modes0, t0, q0, qd0, p, tolerance)
    mu_s = model.static_friction(p)

    def field(t, y, args):
        p_, modes, anchors = args
        ev = model.evaluate(modes, t, y[0], y[1], p_, anchors)
        return ev.q_dot, ev.qdd

    def cond(t, y, args, **kwargs):
        p_, modes, anchors = args
        return model.event_value(modes, t, y[0], y[1], p_, anchors)

    event = diffrax.Event(cond, root_finder=root_finder, direction=False)
    term = diffrax.ODETerm(field)
    k = ts.shape[0]
    S = max_switches

    def segment(carry, i):
        (t, q, qd, modes, anchors, done, status, who, when, q_ts, qd_ts, m_ts, log) = carry
        # A finished run integrates from t1 to t1: no steps, nothing changes.
        start = jnp.where(done, t1, t)
        saveat = diffrax.SaveAt(
            subs=[diffrax.SubSaveAt(t1=True), diffrax.SubSaveAt(ts=jnp.clip(ts, start, t1))]
        )
        sol = diffrax.diffeqsolve(
            term,
            solver,
            start,
            t1,
            dt0,
            (q, qd),
            args=(p, modes, anchors),
            saveat=saveat,
            stepsize_controller=stepsize_controller,
            adjoint=adjoint,
            event=event,
            max_steps=max_steps,
            throw=False,
        )
        t_seg = sol.ts[0][-1]
        q_seg, qd_seg = sol.ys[0][0][-1], sol.ys[0][1][-1]
        ok = diffrax.is_okay(sol.result) | done
        fired = sol.event_mask & ~done & ok

        # The states saved in this segment, with its modes.
        mask = ~done & (ts >= start) & (ts <= t_seg)
        q_ts = jnp.where(mask[:, None], sol.ys[1][0], q_ts)
        qd_ts = jnp.where(mask[:, None], sol.ys[1][1], qd_ts)
        m_ts = jnp.where(mask[:, None], modes[None], m_ts)

        # Which event fired: the condition closest to zero at the event. The dynamics at
        # the event in the current modes, and with each contact rolling, in one evaluation.
        trial = jnp.concatenate([modes[None], jnp.where(jnp.eye(N, dtype=bool), ROLLING, modes)])
        evs = jax.vmap(lambda m: model.evaluate(m, t_seg, q_seg, qd_seg, p, anchors))(trial)
        ev = jax.tree.map(lambda x: x[0], evs)
        # Lift-off first: where N and the cone mu_s N - |lambda_t| vanish together (no
        # tangential load), the contact lifts off rather than slides.
        lowest = jnp.argmin(ev.normal)
        lifted = ev.normal[lowest] <= tolerance * normal_scale
        first = jnp.argmin(model.conditions(modes, ev, anchors, p)[:, 0])
        c = jnp.where(lifted, lowest, first).astype(jnp.int32)
        is_c = jnp.arange(N) == c
        lift = fired & lifted
        switch = fired & ~lifted
        ev_roll = jax.tree.map(lambda x: x[1 + c], evs)

        # rolling -> sliding: the slip starts against the friction force rolling needed.
        was_rolling = modes[c] == ROLLING
        # sliding -> rolling where the slip vanished and rolling keeps in the cone; else
        # slide on: against the friction rolling would need (the slip reverses), or, where
        # the slip only turned by 90 degrees without vanishing, along the current slip.
        slip_c = ev.slip[c]
        vanished = _norm(slip_c) <= tolerance * (1.0 + ev.scale[c])
        holds = mu_s[c] * ev_roll.normal[c] - _norm(ev_roll.tangential[c]) >= 0
        new_mode = jnp.where(was_rolling | ~(vanished & holds), SLIDING, ROLLING)
        new_anchor = jnp.where(
            was_rolling,
            -_unit(ev.tangential[c]),
            jnp.where(vanished, -_unit(ev_roll.tangential[c]), _unit(slip_c)),
        )
        here = switch & is_c
        modes = jnp.where(here, new_mode, modes)
        anchors = jnp.where(here[:, None], new_anchor[None], anchors)

        times, contacts, mode_log = log
        j = jnp.minimum(i, S - 1) if S > 0 else 0
        logged = switch & (i < S)
        if S > 0:
            times = jnp.where(logged, times.at[j].set(t_seg), times)
            contacts = jnp.where(logged, contacts.at[j].set(c), contacts)
            mode_log = jnp.where(logged, mode_log.at[j].set(modes), mode_log)

        new_status = jnp.where(
            ~ok, FAILED, jnp.where(lift, LIFT_OFF, jnp.where(switch & (i >= S), ZENO, OK))
        )
        status = jnp.where(done, status, new_status).astype(jnp.int32)
        who = jnp.where(done | ~fired, who, c).astype(jnp.int32)
        when = jnp.where(done, when, t_seg)
        t = jnp.where(done, t, t_seg)
        q = jnp.where(done, q, q_seg)
        qd = jnp.where(done, qd, qd_seg)
        done = done | ~switch | (i >= S)
        carry = (t, q, qd, modes, anchors, done, status, who, when, q_ts, qd_ts, m_ts)
        return (*carry, (times, contacts, mode_log)), None

    inf = jnp.asarray(jnp.inf, dtype)
    n = q0.shape[0]
    log0 = (
        jnp.full((S,), inf),
        jnp.full((S,), -1, jnp.int32),
        jnp.zeros((S, N), jnp.int32),
    )
    init_bad = jnp.any(codes != _INIT_OK)
    carry0 = (
        t0,
        q0,
        qd0,
        modes0,
        anchors0,
        init_bad,
        jnp.where(init_bad, INCONSISTENT, OK).astype(jnp.int32),
        jnp.where(init_bad, jnp.argmax(codes != _INIT_OK), -1).astype(jnp.int32),
        t0,
        jnp.full((k, n), inf),
        jnp.full((k, n), inf),
        jnp.full((k, N), -1, jnp.int32),
        log0,
    )
    out, _ = jax.lax.scan(segment, carry0, jnp.arange(S + 1))
    (t, q, qd, _, _, _, status, who, when, q_ts, qd_ts, m_ts, log) = out
    times, contacts, mode_log = log
    num = jnp.sum(contacts >= 0).astype(jnp.int32)
    # Pad the mode log with the last modes.
    last = jnp.where(num > 0, mode_log[jnp.maximum(num - 1, 0)], modes0) if S > 0 else modes0
    mode_log = jnp.where((jnp.arange(S) < num)[:, None], mode_log, last[None])
    return ContactTrajectory(
        ts=ts,
        q=q_ts,
        qd=qd_ts,
        modes=m_ts,
        t_final=t,
        q_final=q,
        qd_final=qd,
        switch_times=times,
        switch_contacts=contacts,
        switch_modes=mode_log,
        num_switches=num,
        status=status.astype(jnp.int32),
        failed_contact=jnp.where(status == OK, -1, who).astype(jnp.int32),
        failed_time=jnp.where(status == OK, jnp.nan, when),
        initial_check=codes,
        system=model.system,
        contact_arrays=eqx.partition(model.contacts, eqx.is_array)[0],
        contact_statics=eqx.partition(model.contacts, eqx.is_array)[1],
        p=p,
        contact_names=tuple(c.name for c in model.contacts),
    )


_run_jit = eqx.filter_jit(_run)


DEFAULT_STABILISATION = Projection(alpha=10.0, beta=0.0)
"""What `stabilisation=` defaults to in `simulate_contacts`."""


class _Default:
    def __repr__(self) -> str:
        return f"cx.{DEFAULT_STABILISATION!r}"


_DEFAULT = _Default()


def _messages(contacts, max_switches: int) -> list[str]:
    """The error messages under a trace, indexed `block * N + contact` (`_error_index`)."""
    out = []
    where = "cx.rigid.simulate_contacts"
    for c in contacts:
        out.append(
            f"{where}: the normal reaction of contact {c.name!r} reached zero: the body lifts "
            "off the plane, which FrictionalContact does not model (rerun with throw=False "
            "and read `failed_time`)"
        )
    for c in contacts:
        out.append(
            f"{where}: more than max_switches={max_switches} mode switches, the last at "
            f"contact {c.name!r}: a Zeno sequence of switches? Raise `max_switches` if the "
            "switches are genuine (rerun with throw=False and read `switch_times`)"
        )
    for c in contacts:
        out.append(
            f"{where}: the integration failed between switches (max_steps reached or "
            f"non-finite values; last event at contact {c.name!r})"
        )
    for text in _INIT_CODES[1:]:
        for c in contacts:
            out.append(f"{where}: contact {c.name!r} {text}")
    return out


def _error_index(out: ContactTrajectory, N: int) -> Array:
    c = jnp.maximum(out.failed_contact, 0)
    block = jnp.where(
        out.status == INCONSISTENT,
        3 + jnp.take(out.initial_check, c) - 1,
        jnp.where(out.status == LIFT_OFF, 0, jnp.where(out.status == ZENO, 1, 2)),
    )
    return (block * N + c).astype(jnp.int32)


def _traced(*xs) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(xs))


def _raise_eager(out: ContactTrajectory, contacts, max_switches: int) -> None:
    """Raise the error of a concrete status. Under `jax.grad` the status is concrete but
    the failure time and the parameters are traced: their values are left out."""
    status = int(out.status)
    if status == OK:
        return
    c = max(int(out.failed_contact), 0)
    name = contacts[c].name
    where = "cx.rigid.simulate_contacts"
    if status == INCONSISTENT:
        code = int(out.initial_check[c])
        detail = ""
        if code in (1, 2, 3):
            mu_s, mu_k = contacts[c].coefficients(out.p)
            if not _traced(mu_s, mu_k):
                detail = f" (got mu_s = {float(mu_s)}, mu_k = {float(mu_k)})"
        raise ValueError(f"{where}: contact {name!r} {_INIT_CODES[code]}{detail}")
    if _traced(out.failed_time):
        index = int(_error_index(out, len(contacts)))
        error = ValueError if status == LIFT_OFF else RuntimeError
        raise error(_messages(contacts, max_switches)[index])
    time = float(out.failed_time)
    if status == LIFT_OFF:
        raise ValueError(
            f"{where}: the normal reaction of contact {name!r} reached zero at t = {time!r}: "
            "the body lifts off the plane, which FrictionalContact does not model"
        )
    if status == ZENO:
        raise RuntimeError(
            f"{where}: more than max_switches={max_switches} mode switches by t = {time!r}, the "
            f"last at contact {name!r}: a Zeno sequence of switches? Raise `max_switches` if "
            "the switches are genuine"
        )
    raise RuntimeError(
        f"{where}: the integration failed after t = {time!r} (max_steps reached or non-finite "
        "values)"
    )


def _check_coefficients(contacts, p) -> None:
    """The friction coefficients read from `p`, checked now where they are concrete (under
    a trace the run checks them, `ContactTrajectory.initial_check`)."""
    for c in contacts:
        mu_s, mu_k = c.coefficients(p)
        if isinstance(mu_s, jax.core.Tracer) or isinstance(mu_k, jax.core.Tracer):
            continue
        mu_s, mu_k = float(mu_s), float(mu_k)
        where = f"cx.rigid.simulate_contacts: contact {c.name!r}"
        got = f" (got mu_s = {mu_s}, mu_k = {mu_k})"
        if not (np.isfinite(mu_s) and mu_s >= 0):
            raise ValueError(f"{where} {_INIT_CODES[1]}{got}")
        if not (np.isfinite(mu_k) and mu_k >= 0):
            raise ValueError(f"{where} {_INIT_CODES[2]}{got}")
        if mu_s < mu_k:
            raise ValueError(f"{where} {_INIT_CODES[3]}{got}")


def _check_state(x, name: str) -> Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    if x.ndim != 1:
        raise ValueError(f"`{name}` must be a 1-D array (n,), got shape {x.shape}")
    return x


def simulate_contacts(
    system: "cx.System",
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
    r"""Integrate `system` with frictional contacts that switch between rolling and
    sliding where Coulomb friction decides (Loparo & Vakalis 2002, §7.9).

    Each contact is *rolling* (its no-slip rows are constraints, their multipliers the
    friction force $\lambda_t$) or *sliding* (kinetic friction $-\mu_k N\hat s$ at the
    contact point, $N$ the normal reaction). Rolling turns to sliding where
    $|\lambda_t| = \mu_s N$ (leaving the static friction cone), sliding to rolling where
    the slip velocity vanishes — unless rolling would then leave the cone at once, and
    the slip reverses. The switching times are located by root finding on diffrax's dense
    output (`diffrax.Event`), the state carried across unchanged; `jax.grad` of anything
    computed from the result passes through the switching times (the implicit function
    theorem on the event condition). Docs page "Rolling or sliding".

    **Arguments:**

    - `system`: a `cx.System` *without* the contacts: its Lagrangian, its other
      constraints (e.g. `body.orientation_constraint()`) and its force.
    - `contacts`: `cx.rigid.FrictionalContact`s; their rows come first in each segment's
      system.
    - `q0`, `qd0`, `p`: initial state `(n,)` and parameters (any pytree).
    - `modes`: the initial mode of each contact, `"rolling"` or `"sliding"`. A state
      inconsistent with its mode is refused (a rolling contact that slips or needs more
      friction than $\mu_s N$, a sliding one that does not slip).
    - `t0`, `t1`, `ts`: time span and save times `(k,)` (default `[t0, t1]`).
    - `dt0`, `solver` (`diffrax.Tsit5()`), `stepsize_controller` (a `PIDController` with
      `rtol = atol =` $10^{-8}$ in float64, steps capped by the stabilisation's rate as
      in `cx.simulate`), `adjoint` (`RecursiveCheckpointAdjoint()`), `max_steps` (per
      segment): passed to `diffrax.diffeqsolve`.
    - `root_finder`: locates the switches (default `optimistix.Newton` with
      `rtol = atol =` $10^{-10}$ in float64).
    - `stabilisation`: `cx.Projection(alpha=10.0, beta=0.0)` (default), `cx.Baumgarte`
      or `None` (none); a `Projection` with `beta != 0` is refused (the friction is evaluated at
      the projected velocity, which its position correction would not be).
    - `initial_tolerance`: the largest violation of `system`'s own constraint rows accepted
      at `t0` (absolute on holonomic rows, relative to $\max(1, |\dot q|_\infty)$ on
      velocity rows; default `1e-8`, or `1000 * eps` of the dtype where that is larger), as
      in `cx.simulate`; `None` skips the check. Project a state first with
      `cx.consistent_initial_state(system, ...)`.
    - `max_switches`: the budget of segment boundaries (a sliding contact re-anchoring
      its slip direction counts too); exceeding it raises (a Zeno sequence).
    - `tolerance`: relative tolerance of "the slip is zero" (default
      $\max(10^{-8}, 1000\epsilon)$).
    - `throw`: raise on lift-off, an exhausted budget, a failed integration or an
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
    if not isinstance(system, cx.System):
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
    if isinstance(stabilisation, cx.Projection) and float(stabilisation.beta) != 0.0:
        raise ValueError(
            "simulate_contacts: `stabilisation` must be cx.Projection(alpha, beta=0.0), "
            f"cx.Baumgarte(...) or None, got beta={stabilisation.beta}"
        )
    q0 = _check_state(q0, "q0")
    qd0 = _check_state(qd0, "qd0")
    if qd0.shape != q0.shape:
        raise length_mismatch_error(
            system, t0, {"q0": q0, "qd0": qd0.astype(q0.dtype)}, p, "cx.rigid.simulate_contacts"
        )
    dtype = q0.dtype
    t0a, t1a = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
    if not isinstance(t0a, jax.core.Tracer) and not isinstance(t1a, jax.core.Tracer):
        if not float(t1a) > float(t0a):
            raise ValueError(f"`t1` must be greater than `t0`, got t0={t0}, t1={t1}")
    ts = jnp.stack([t0a, t1a]) if ts is None else jnp.asarray(ts, dtype)
    if ts.ndim != 1 or ts.shape[0] == 0:
        raise ValueError(f"`ts` must be a non-empty 1-D array of save times, got shape {ts.shape}")
    if not isinstance(ts, jax.core.Tracer):
        t_np = np.asarray(ts)
        if np.any(np.diff(t_np) < 0) or t_np[0] < float(t0a) or t_np[-1] > float(t1a):
            raise ValueError(f"`ts` must be non-decreasing and within [t0, t1], got {t_np}")
    eps = float(jnp.finfo(dtype).eps)
    if tolerance is None:
        tolerance = max(1e-8, 1000 * eps)
    if solver is None:
        solver = diffrax.Tsit5()
    if stepsize_controller is None:
        tol = max(1e-8, 100 * eps)
        rate = stabilisation.fastest_rate() if stabilisation is not None else 0.0
        dtmax = 1.0 / rate if rate > 0 else None
        stepsize_controller = diffrax.PIDController(rtol=tol, atol=tol, dtmax=dtmax)
    if root_finder is None:
        tol = max(1e-10, 100 * eps)
        root_finder = optx.Newton(rtol=tol, atol=tol)
    if adjoint is None:
        adjoint = diffrax.RecursiveCheckpointAdjoint()
    p = jax.tree.map(lambda x: jnp.asarray(x, dtype) if isinstance(x, float) else x, p)
    _check_coefficients(contacts, p)
    # The system's own rows (e.g. an orientation constraint) at t0; the contacts' rows
    # below, with the same rules; the friction cone and the normal reaction inside the run.
    if initial_tolerance is _DEFAULT:
        initial_tolerance = default_initial_tolerance(dtype)
    # The shapes of the system's functions first (their errors name the coordinates).
    layout = row_layout(system, t0a, q0, qd0, p)
    # The contacts' own rows in their initial modes, and their shapes' radii.
    q0 = check_contacts(
        contacts,
        codes,
        t0a,
        q0,
        qd0,
        p,
        None if initial_tolerance is None else float(initial_tolerance),
        "cx.rigid.simulate_contacts",
    )
    if initial_tolerance is not None and system.constraints:
        q0 = check_initial_state(
            system,
            None,
            layout,
            t0a,
            q0,
            qd0,
            None,
            p,
            float(initial_tolerance),
            False,
            where="cx.rigid.simulate_contacts",
        )
    out = _run_jit(
        _Static(system, stabilisation),
        contacts,
        jnp.asarray(codes, jnp.int32),
        t0a,
        t1a,
        q0,
        qd0,
        p,
        ts,
        dt0=dt0,
        solver=solver,
        stepsize_controller=stepsize_controller,
        root_finder=root_finder,
        adjoint=adjoint,
        max_switches=int(max_switches),
        max_steps=int(max_steps),
        tolerance=float(tolerance),
    )
    if not throw:
        return out
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
