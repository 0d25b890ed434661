r"""The run of `simulate_contacts`: a `jax.lax.scan` over at most `max_switches + 1`
segments, each a `diffrax.diffeqsolve` in fixed modes up to its event (docs page "Rolling
or sliding").

Each step of the scan takes a boundary, then integrates the segment after it: the first
step's boundary is the initial state (its checks, `_run_checks`), each later one the event
that ended the segment before (`_mode_switch`). Both read the dynamics at the boundary's
state from one evaluation, so the program holds one copy of it for the two (a separate
initial check was a second copy, a tenth of the program to compile); the last step's
segment, after the last possible switch, integrates nothing.

The program's shapes are capacities, not the request: the save times are padded to a
capacity and the switch log has one too (`capacity`: powers of two from 16), and the
switch budget `max_switches` is run-time data, so a new number of save times or a new
budget within the capacities runs the compiled program again. The segments after a run
has ended integrate from $t_1$ to $t_1$ (no steps; nothing changes).

A segment integrates from where the last one ended to $t_1$, stopped by
`diffrax.Event` at the first sign change of $\min_i\min(\phi_i, N_i)$ (`_mode_dynamics`),
located by a root find on the step's dense output; it saves the requested times it
covers, switches the contact at fault (`_mode_switch`), logs the switch and carries the
state across unchanged. A finished run integrates from $t_1$ to $t_1$: no steps, nothing
changes; once the run has ended (every member's, under `jax.vmap`) the scan's steps
are skipped. The event time is a differentiable function of the parameters and of the initial
state (the implicit function theorem on $\phi(t^*) = 0$, as diffrax differentiates its
events), so `jax.grad` through the run includes the sensitivity of every switching time.
"""

import functools
from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jaxtyping import Array

from ..._compilation import _staged, compiler_options
from ._contact_trajectory import FAILED, IMPACT, INCONSISTENT, OK, ZENO, ContactTrajectory
from ._event_time import exact_rate
from ._mode_dynamics import _Model
from ._mode_switch import switch_at_event
from ._run_checks import _INIT_OK, _initial_codes, initial_anchors


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


class _Carry(NamedTuple):
    """The state of the walk between segments."""

    t: Array  # where the last segment ended (where the run ended, once done)
    q: Array
    qd: Array
    modes: Array  # (N,) the modes of the last segment
    anchors: Array  # (N, 3) the slip directions of the sliding contacts
    ran: Array  # the last segment was integrated (the run had not ended before it)
    fired: Array  # its event fired (a switch is due at its end)
    ok: Array  # its integration succeeded
    done: Array  # the run has ended (t1 reached, a failure, or the budget spent)
    status: Array  # the status code (`_contact_trajectory`)
    who: Array  # the contact of the last event
    when: Array  # the time of the last event
    codes: Array  # (N,) the initial checks' codes (`_run_checks`)
    normal_scale: Array  # the scale of the normal reactions (from the initial state)
    q_ts: Array  # (k, n) the states at the save times (`inf` where not reached)
    qd_ts: Array
    m_ts: Array  # (k, N) the modes there
    # (times (S,), contacts (S,), modes (S, N), q (S, n), qd (S, n), switched (S, N),
    # impulses (S, N, 3)) of the switches
    log: tuple


class _Walk(NamedTuple):
    """What every segment reads: the model, its vector field and event, diffrax's
    options, the parameters, the save times and the tolerances."""

    model: _Model
    term: diffrax.ODETerm
    event: diffrax.Event
    solver: Any
    stepsize_controller: Any
    adjoint: Any
    dt0: Any
    max_steps: int
    p: Any
    ts: Array
    t1: Array
    mu_s: Array
    tolerance: float
    max_switches: Array  # the switch budget (run-time data; the log holds `capacity`)


def _term_and_event(root_finder) -> tuple[diffrax.ODETerm, diffrax.Event]:
    """The vector field of a segment in its modes, and its event $\\min_i\\min(\\phi_i,
    N_i)$, both reading `args = (model, p, modes, anchors, rest)` (the model too: the field
    closes over no array, as `exact_rate` needs).

    `rest` is `(done, q, qd)`: whether the run has finished, and its carried state. Under
    `vmap` diffrax evaluates the event's root find of every lane, also of one that took no
    step, on an interpolation of zeros (and the field there, for the rate of
    `exact_rate`'s dense output); such a lane's event and field are evaluated at its carried
    state instead, where the dynamics are defined (their checks would fire on zeros). A
    finished lane takes no step, so its field is read nowhere else."""

    def at_rest(y, rest):
        done, q_rest, qd_rest = rest
        return jnp.where(done, q_rest, y[0]), jnp.where(done, qd_rest, y[1])

    def field(t, y, args):
        model, p_, modes, anchors, rest = args
        q, qd = at_rest(y, rest)
        ev = model.evaluate(modes, t, q, qd, p_, anchors)
        return ev.q_dot, ev.qdd

    def cond(t, y, args, **kwargs):
        model, p_, modes, anchors, rest = args
        q, qd = at_rest(y, rest)
        return model.event_value(modes, t, q, qd, p_, anchors)

    return diffrax.ODETerm(field), diffrax.Event(cond, root_finder=root_finder, direction=False)


def _integrate(walk: _Walk, carry: _Carry, start) -> diffrax.Solution:
    """One segment from `start` to $t_1$ in the carried modes, saving its end and the save
    times (clipped to the segment)."""
    saveat = diffrax.SaveAt(
        subs=[diffrax.SubSaveAt(t1=True), diffrax.SubSaveAt(ts=jnp.clip(walk.ts, start, walk.t1))]
    )
    args = (walk.model, walk.p, carry.modes, carry.anchors, (carry.done, carry.q, carry.qd))
    return diffrax.diffeqsolve(
        walk.term,
        exact_rate(walk.solver, walk.term, args),  # the event's rate from the field
        start,
        walk.t1,
        walk.dt0,
        (carry.q, carry.qd),
        args=args,
        saveat=saveat,
        stepsize_controller=walk.stepsize_controller,
        adjoint=walk.adjoint,
        event=walk.event,
        max_steps=walk.max_steps,
        throw=False,
    )


def _log_switch(log, i, switch, entry, S) -> tuple:
    """Segment boundary `i` in the switch log: its time, its contact, the modes and the
    state after it (`entry`, in the order of the log; the first `S` boundaries, `S` at
    most the log's length)."""
    if log[0].shape[0] == 0:
        return log
    j = jnp.minimum(i, S - 1)
    logged = switch & (i < S)
    return tuple(jnp.where(logged, x.at[j].set(v), x) for x, v in zip(log, entry, strict=True))


def _boundary(walk: _Walk, carry: _Carry, j) -> _Carry:
    """Boundary `j`: the initial state's checks (`j = 0`), or the switch at the end of
    segment `i = j - 1` (its event, the contact at fault, the log, the status), and the
    state the next segment starts from."""
    model, i, S = walk.model, j - 1, walk.max_switches
    first = j == 0
    ev = model.evaluate(carry.modes, carry.t, carry.q, carry.qd, walk.p, carry.anchors)
    codes, scale = _initial_codes(
        model, carry.modes, carry.t, carry.q, carry.qd, walk.p, walk.tolerance, ev
    )
    codes = jnp.where(first, codes, carry.codes)
    normal_scale = jnp.where(first, scale, carry.normal_scale)
    init_bad = first & jnp.any(codes != _INIT_OK)
    t_seg, fired = carry.t, carry.fired
    at = switch_at_event(
        model,
        carry.modes,
        carry.anchors,
        fired,
        t_seg,
        carry.q,
        carry.qd,
        walk.p,
        walk.mu_s,
        walk.tolerance,
        normal_scale,
        ev,
    )
    c, switch = at.contact, at.switch
    # The saves of the segment up to its boundary: a touchdown is taken at the zero of its
    # gap, at `at.t`, next to the located event (`_mode_switch`). A save time between the
    # event and `at.t` gets the flight's state by the same Taylor step; one between `at.t`
    # and an event located late is the next segment's (unsaved until it runs).
    ts, ran = walk.ts, carry.ran
    late = (ran & (ts > t_seg) & (ts <= at.t))[:, None]
    early = (ran & (ts > at.t) & (ts <= t_seg))[:, None]
    tau = (ts - t_seg)[:, None]
    q_dot, qdd = at.rate
    inf = jnp.asarray(jnp.inf, carry.q.dtype)
    q_late = carry.q + (q_dot + 0.5 * tau * qdd) * tau
    q_ts = jnp.where(late, q_late, jnp.where(early, inf, carry.q_ts))
    qd_ts = jnp.where(late, carry.qd + tau * qdd, jnp.where(early, inf, carry.qd_ts))
    m_ts = jnp.where(late, carry.modes[None], jnp.where(early, -1, carry.m_ts))
    entry = (at.t, c, at.modes, at.q, at.qd, at.contacts, at.impulses)
    log = _log_switch(carry.log, i, switch, entry, S)
    status = jnp.where(
        ~carry.ok,
        FAILED,
        jnp.where(at.unsolvable, IMPACT, jnp.where(switch & (i >= S), ZENO, OK)),
    )
    done = carry.done
    kept = done | first  # the state stays: the run had ended, or it starts here
    return _Carry(
        t=jnp.where(done, carry.t, at.t),
        q=jnp.where(done, carry.q, at.q),
        qd=jnp.where(done, carry.qd, at.qd),
        modes=at.modes,
        anchors=at.anchors,
        ran=carry.ran,
        fired=fired,
        ok=carry.ok,
        done=jnp.where(first, init_bad, done | ~switch | (i >= S) | at.unsolvable),
        status=jnp.where(
            first, jnp.where(init_bad, INCONSISTENT, OK), jnp.where(done, carry.status, status)
        ).astype(jnp.int32),
        who=jnp.where(
            first,
            jnp.where(init_bad, jnp.argmax(codes != _INIT_OK), -1),
            jnp.where(done | ~fired, carry.who, c),
        ).astype(jnp.int32),
        when=jnp.where(kept, carry.when, at.t),
        codes=codes,
        normal_scale=normal_scale,
        q_ts=q_ts,
        qd_ts=qd_ts,
        m_ts=m_ts,
        log=log,
    )


def _segment(walk: _Walk, carry: _Carry) -> _Carry:
    """The segment after a boundary: integrate to its event and save the times it covers
    (a finished run integrates from $t_1$ to $t_1$: no steps, nothing changes)."""
    done = carry.done
    start = jnp.where(done, walk.t1, carry.t)
    sol = _integrate(walk, carry, start)
    t_seg = sol.ts[0][-1]
    q_seg, qd_seg = sol.ys[0][0][-1], sol.ys[0][1][-1]
    ok = diffrax.is_okay(sol.result) | done
    saved = (~done & (walk.ts >= start) & (walk.ts <= t_seg))[:, None]
    return carry._replace(
        t=jnp.where(done, carry.t, t_seg),
        q=jnp.where(done, carry.q, q_seg),
        qd=jnp.where(done, carry.qd, qd_seg),
        ran=~done,
        fired=sol.event_mask & ~done & ok,
        ok=ok,
        q_ts=jnp.where(saved, sol.ys[1][0], carry.q_ts),
        qd_ts=jnp.where(saved, sol.ys[1][1], carry.qd_ts),
        m_ts=jnp.where(saved, carry.modes[None], carry.m_ts),
    )


def _step(walk: _Walk, carry: _Carry, j) -> tuple[_Carry, None]:
    """Step `j` of the scan: boundary `j`, then segment `j` (module docstring); skipped
    once the run has ended (under `jax.vmap`, once every member's has), where both would
    leave the carry as it is."""

    def live(carry):
        return _segment(walk, _boundary(walk, carry, j))

    ended = eqxi.unvmap_all(carry.done & ~carry.ran & ~carry.fired & carry.ok)
    return jax.lax.cond(ended, lambda c: c, live, carry), None


def _initial_carry(modes0, t0, q0, qd0, anchors0, k: int, S: int) -> _Carry:
    """The walk before its first boundary: the initial state, as if a segment had ended
    there without an event."""
    inf = jnp.asarray(jnp.inf, q0.dtype)
    n, N = q0.shape[0], modes0.shape[0]
    log0 = (
        jnp.full((S,), inf),
        jnp.full((S,), -1, jnp.int32),
        jnp.zeros((S, N), jnp.int32),
        jnp.full((S, n), inf),
        jnp.full((S, n), inf),
        jnp.zeros((S, N), bool),
        jnp.zeros((S, N, 3), q0.dtype),
    )
    false = jnp.asarray(False)
    return _Carry(
        t=t0,
        q=q0,
        qd=qd0,
        modes=modes0,
        anchors=anchors0,
        ran=false,
        fired=false,
        ok=jnp.asarray(True),
        done=false,
        status=jnp.asarray(OK, jnp.int32),
        who=jnp.asarray(-1, jnp.int32),
        when=t0,
        codes=jnp.zeros(N, jnp.int32),
        normal_scale=jnp.ones((), q0.dtype),
        q_ts=jnp.full((k, n), inf),
        qd_ts=jnp.full((k, n), inf),
        m_ts=jnp.full((k, N), -1, jnp.int32),
        log=log0,
    )


def _trajectory(out: _Carry, model: _Model, modes0, ts, p, S: int) -> ContactTrajectory:
    """The `ContactTrajectory` of the final carry, its mode log padded with the last
    modes."""
    times, contacts, mode_log, q_log, qd_log, switched, impulses = out.log
    num = jnp.sum(contacts >= 0).astype(jnp.int32)
    last = jnp.where(num > 0, mode_log[jnp.maximum(num - 1, 0)], modes0) if S > 0 else modes0
    mode_log = jnp.where((jnp.arange(S) < num)[:, None], mode_log, last[None])
    status = out.status
    return ContactTrajectory(
        ts=ts,
        q=out.q_ts,
        qd=out.qd_ts,
        modes=out.m_ts,
        t_final=out.t,
        q_final=out.q,
        qd_final=out.qd,
        switch_times=times,
        switch_contacts=contacts,
        switch_modes=mode_log,
        switch_q=q_log,
        switch_qd=qd_log,
        switched=switched,
        impulses=impulses,
        num_switches=num,
        status=status.astype(jnp.int32),
        failed_contact=jnp.where(status == OK, -1, out.who).astype(jnp.int32),
        failed_time=jnp.where(status == OK, jnp.nan, out.when),
        initial_check=out.codes,
        system=model.system,
        contact_arrays=eqx.partition(model.contacts, eqx.is_array)[0],
        contact_statics=eqx.partition(model.contacts, eqx.is_array)[1],
        p=p,
        stabilisation=model.stabilisation,
        contact_names=tuple(c.name for c in model.contacts),
    )


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
    max_switches,
    capacity: int,
    max_steps: int,
    tolerance: float,
) -> ContactTrajectory:
    """The initial checks, then the segments (module docstring)."""
    system, stabilisation = static.parts
    model = _Model(system, contacts, stabilisation, gap_margin=tolerance)
    anchors0 = initial_anchors(model, t0, q0, qd0, p)
    term, event = _term_and_event(root_finder)
    walk = _Walk(
        model=model,
        term=term,
        event=event,
        solver=solver,
        stepsize_controller=stepsize_controller,
        adjoint=adjoint,
        dt0=dt0,
        max_steps=max_steps,
        p=p,
        ts=ts,
        t1=t1,
        mu_s=model.static_friction(p),
        tolerance=tolerance,
        max_switches=max_switches,
    )
    S = capacity  # the log's length; the budget `max_switches` is at most it
    carry0 = _initial_carry(modes0, t0, q0, qd0, anchors0, ts.shape[0], S)
    # Boundaries 0 (the initial state) to S + 1 (after segment S, the last the budget
    # allows), each followed by its segment (module docstring).
    out, _ = jax.lax.scan(functools.partial(_step, walk), carry0, jnp.arange(S + 2))
    return _trajectory(out, model, modes0, ts, p, S)


@functools.cache
def _jitted(options: tuple | None):
    return eqx.filter_jit(_run, compiler_options=None if options is None else dict(options))


def _run_jit(*args, **kwargs) -> ContactTrajectory:
    """`_run` compiled: with constrax's XLA options (`compiler_options`: the LLVM IR
    emitters on the CPU, as `cx.simulate`) where the call is not staged into a larger
    program, which sets its own."""
    options = None if _staged() else compiler_options(jax.default_backend())
    return _jitted(None if options is None else tuple(sorted(options.items())))(*args, **kwargs)


def capacity(n: int) -> int:
    """The capacity for `n` save times or switches: the next power of two from 16 (0 for
    `n = 0`)."""
    return 0 if n == 0 else max(16, 1 << (int(n) - 1).bit_length())


_SAVED = lambda o: (o.ts, o.q, o.qd, o.modes)  # noqa: E731
_LOGGED = lambda o: (o.switch_times, o.switch_contacts, o.switch_modes, o.switch_q,  # noqa: E731
                     o.switch_qd, o.switched, o.impulses)  # fmt: skip


@eqx.filter_jit  # one small program per (k, S) rather than a dispatch per array
def trimmed(out: ContactTrajectory, k: int, S: int) -> ContactTrajectory:
    """`out` with its save times cut to the `k` requested and its switch log to `S`."""
    if out.ts.shape[0] != k:
        out = eqx.tree_at(_SAVED, out, tuple(x[:k] for x in _SAVED(out)))
    if out.switch_times.shape[0] != S:
        out = eqx.tree_at(_LOGGED, out, tuple(x[:S] for x in _LOGGED(out)))
    return out
