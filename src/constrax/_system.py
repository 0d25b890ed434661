"""`System`: a Lagrangian, its constraints and a generalized force
(docs/concepts/lagrangians.md). What the engine derives from it is in `_terms.py` (or, where
the system carries `dynamics`, in its `AbstractDynamics`, `_unconstrained.py`), the
trace-time checks of its functions' shapes in `_layout.py`."""

from collections.abc import Sequence

import equinox as eqx

from ._constraints import AbstractConstraint
from ._custom_types import ForceFn, LagrangianFn
from ._kinds import kinds
from ._unconstrained import AbstractDynamics


class System(eqx.Module):
    r"""A constrained mechanical system.

    **Arguments:**

    - `lagrangian`: `L(t, q, qd, p) -> scalar`.
    - `constraints`: a sequence of `Holonomic`, `Pfaffian` and `VelocityConstraint`
      (any mix). Their rows are stacked in the order given; `multipliers` follow it.
    - `force`: optional non-conservative generalized force `Q(t, q, qd, p) -> (n,)`
      (friction, dissipation, controls). It is *not* a constraint force: it enters $f$
      and is reported apart from the reactions.
    - `dynamics`: optional `AbstractDynamics` (keyword only): the unconstrained
      Euler–Lagrange terms $(W, f_0)$ of `lagrangian`, computed another way (e.g. the
      tree recursions of `cx.rigid.from_mjcf`). `lagrangian` stays the reference (energy,
      diagnostics, linearisation read it); `dynamics` must give exactly its terms. A system
      rebuilt from another (`System(s.lagrangian, ..., dynamics=s.dynamics)`) carries it over.

    **Example:**

    ```python
    def L(t, q, qd, p):
        return 0.5 * p["m"] * qd @ qd - p["m"] * 9.81 * q[1]
    def rod(t, q, p):
        return q @ q - p["l"] ** 2
    pendulum = cx.System(lagrangian=L, constraints=[cx.Holonomic(rod)])
    ```
    """

    lagrangian: LagrangianFn
    constraints: tuple[AbstractConstraint, ...]
    force: ForceFn | None
    dynamics: AbstractDynamics | None

    def __init__(
        self,
        lagrangian: LagrangianFn,
        constraints: Sequence[AbstractConstraint] = (),
        force: ForceFn | None = None,
        *,
        dynamics: AbstractDynamics | None = None,
    ):
        if not callable(lagrangian):
            raise TypeError(f"`lagrangian` must be callable L(t, q, qd, p), got {lagrangian!r}")
        if isinstance(constraints, AbstractConstraint):
            constraints = (constraints,)
        constraints = tuple(constraints)
        for i, con in enumerate(constraints):
            if not isinstance(con, AbstractConstraint):
                raise TypeError(
                    f"`constraints[{i}]` must be a {kinds(AbstractConstraint)}, "
                    f"got {type(con).__name__}"
                )
        if force is not None and not callable(force):
            raise TypeError(f"`force` must be callable Q(t, q, qd, p) or None, got {force!r}")
        if dynamics is not None and not isinstance(dynamics, AbstractDynamics):
            raise TypeError(
                "`dynamics` must be an AbstractDynamics (the Euler–Lagrange terms of "
                f"`lagrangian`, e.g. those of cx.rigid.from_mjcf) or None, got {dynamics!r}"
            )
        self.lagrangian = lagrangian
        self.constraints = constraints
        self.force = force
        self.dynamics = dynamics
