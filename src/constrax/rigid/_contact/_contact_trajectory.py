"""`ContactTrajectory`, the result of `simulate_contacts`, its status codes and the
quantities along it (docs page "Rolling or sliding")."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ..._diagnostics import energy
from ..._system import System
from ._frictional_contact import MODES, ROLLING, SEPARATED, SLIDING, FrictionalContact
from ._mode_dynamics import _Model, _norm, _units

# Status codes of a run (`ContactTrajectory.status`).
# Code 1 (lift-off) is no longer produced: a contact whose normal reaction vanishes separates.
OK, LIFT_OFF, ZENO, FAILED, INCONSISTENT, IMPACT = 0, 1, 2, 3, 4, 5
_STATUS = (
    "ok",
    "lift-off",
    "switch budget exhausted",
    "integration failed",
    "inconsistent start",
    "impact without a consistent impulse",
)


class ContactForces(eqx.Module):
    r"""The contact forces of a `ContactTrajectory` at its save times
    (`ContactTrajectory.contact_forces`), per contact, in world axes.

    - `normal` `(k, N)`: the normal reaction $N_i$ (zero while separated).
    - `friction` `(k, N, 3)`: the friction force on the body at the contact point: the
      tangential reaction of the no-slip rows while rolling, $-\mu_kN_i\hat s_i$ while
      sliding, zero while separated.
    - `slip` `(k, N, 3)`: the slip velocity $s_i$, the tangential velocity of the
      body's contact point relative to the surface.

    Save times after a run that stopped early hold `nan`.
    """

    normal: Float[Array, "k N"]
    friction: Float[Array, "k N 3"]
    slip: Float[Array, "k N 3"]


class ContactTrajectory(eqx.Module):
    r"""The result of `simulate_contacts`.

    - `ts` `(k,)`, `q`, `qd` `(k, n)`: the state at the requested save times; `modes`
      `(k, N)`: each contact's mode there (0 rolling, 1 sliding, 2 separated; names in
      `mode_names`).
      Times after a run that stopped early hold `inf`.
    - `t_final`, `q_final`, `qd_final`: where the run ended (`t1` unless it stopped).
    - `switch_times` `(S,)`, `switch_contacts` `(S,)`, `switch_modes` `(S, N)`: every
      segment boundary in order — its time, the contact whose event fired and the modes
      after it — padded with `inf`, `-1` and the last modes up to `S = max_switches`.
      A sliding contact whose slip turned by 60° without vanishing re-anchors
      its slip direction: a boundary at which the modes stay the same.
    - `switched` `(S, N)`: at each boundary, every contact that switched there (more
      than `switch_contacts` names where events coincide: contacts that touch down, lift
      off or stop slipping at one instant switch together).
    - `impulses` `(S, N, 3)`: at each boundary that is an impact, the impulse at each
      contact in its contact frame (normal, then the two tangential components; a
      simultaneous impact has several), zero elsewhere.
    - `num_switches`: the number of boundaries.
    - `status`: 0 ok, 2 switch budget exhausted, 3 integration failed, 4 inconsistent
      initial state, 5 an impact without a consistent impulse; `failed_contact` and
      `failed_time` say where. (1, lift-off, is no longer produced: the contact separates.)
    - `initial_check` `(N,)`: per contact, 0 or the code of the failed initial check.
    - `contact_forces()`: the normal reaction, the friction force and the slip of every
      contact at the save times (`ContactForces`).

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
    switch_q: Float[Array, "S n"]
    switch_qd: Float[Array, "S n"]
    switched: Bool[Array, "S N"]
    impulses: Float[Array, "S N 3"]
    num_switches: Int[Array, ""]
    status: Int[Array, ""]
    failed_contact: Int[Array, ""]
    failed_time: Float[Array, ""]
    initial_check: Int[Array, " N"]
    system: System = eqx.field(static=True)
    # The contacts, split into their arrays and the rest (callables, names: static), so
    # that a `ContactTrajectory` can be returned from `jax.jit`; `contacts` joins them.
    contact_arrays: tuple
    contact_statics: tuple = eqx.field(static=True)
    p: object
    stabilisation: object = eqx.field(static=True)
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
        return jax.vmap(lambda t, q, qd: energy(self.system, t, q, qd, self.p))(
            self.ts, self.q, self.qd
        )

    def slip_speed(self) -> Float[Array, "k N"]:
        """$|s|$ of every contact at the save times."""

        def one(t, q, qd):
            return jnp.stack([_norm(c.slip_velocity(t, q, qd, self.p)) for c in self.contacts])

        return jax.vmap(one)(self.ts, self.q, self.qd)

    def contact_forces(self) -> ContactForces:
        r"""The normal reaction, the friction force and the slip velocity of every contact
        at the save times, in each one's saved mode (the dynamics of that mode at the
        saved state, as the run evaluated them; `ContactForces`)."""
        model = _Model(self.system, self.contacts, self.stabilisation)
        reached = jnp.all(jnp.isfinite(self.q), axis=1) & jnp.all(self.modes >= 0, axis=1)

        def one(t, q, qd, modes):
            slips, _ = model.slips(t, q, qd, self.p)
            ev = model.evaluate(modes, t, q, qd, self.p, _units(slips))
            mu_k = jnp.stack([c.coefficients(self.p)[1] for c in self.contacts])
            directions = [
                c.slip_direction(t, q, qd, self.p, a)
                for c, a in zip(self.contacts, _units(ev.slip), strict=True)
            ]
            kinetic = -(mu_k * ev.normal)[:, None] * jnp.stack(directions)
            friction = jnp.where(
                (modes == ROLLING)[:, None],
                ev.tangential,
                jnp.where((modes == SLIDING)[:, None], kinetic, 0.0),
            )
            return ev.normal, friction, ev.slip

        # Times the run did not reach are evaluated at its final state, then set to nan.
        q = jnp.where(reached[:, None], self.q, self.q_final)
        qd = jnp.where(reached[:, None], self.qd, self.qd_final)
        modes = jnp.where(reached[:, None], self.modes, SEPARATED)
        out = jax.jit(jax.vmap(one))(self.ts, q, qd, modes)
        nan = jnp.asarray(jnp.nan, self.q.dtype)
        normal, friction, slip = (
            jnp.where(reached.reshape((-1,) + (1,) * (x.ndim - 1)), x, nan) for x in out
        )
        return ContactForces(normal, friction, slip)
