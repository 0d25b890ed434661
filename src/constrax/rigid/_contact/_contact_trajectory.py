"""`ContactTrajectory`, the result of `simulate_contacts`, its status codes and the
quantities along it (docs page "Rolling or sliding")."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ..._diagnostics import energy
from ..._system import System
from ._frictional_contact import MODES, FrictionalContact
from ._mode_dynamics import _norm

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
    - `num_switches`: the number of boundaries.
    - `status`: 0 ok, 2 switch budget exhausted, 3 integration failed, 4 inconsistent
      initial state, 5 an impact without a consistent impulse; `failed_contact` and
      `failed_time` say where. (1, lift-off, is no longer produced: the contact separates.)
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
    switch_q: Float[Array, "S n"]
    switch_qd: Float[Array, "S n"]
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
