r"""`Model`: a ready-made constrained system with default parameters and a consistent
initial state (the model zoo's common container)."""

from collections.abc import Mapping

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._system import System


class Model(eqx.Module):
    r"""A constrained mechanical system bundled with its parameters and an initial state.

    Every function of `model.system` reads its physical constants from the parameter
    pytree `p` passed at call time, so `model.params` can be replaced, batched with
    `vmap`, or differentiated.

    **Fields:**

    - `system`: the `cx.System` (Lagrangian, constraints, generalized force).
    - `params`: `dict[str, Array]` of physical parameters (keys documented by each model
      function).
    - `q0`, `qd0`: an initial state `(n,)` that satisfies the constraints at `t = 0`
      for the default (or overridden) parameters.
    - `coordinates`: static names of the entries of `q`.

    **Example:**

    ```python
    import constrax as cx
    model = cx.models.chaplygin_sleigh(a=0.3)
    traj = cx.simulate(model.system, model.q0, model.qd0, model.params, t1=5.0)
    ```

    To start elsewhere, replace the state and project it onto the constraints:
    `q0, qd0 = cx.consistent_initial_state(model.system, 0.0, q0, qd0, model.params)`.
    """

    system: System
    params: dict[str, Array]
    q0: Float[Array, " n"]
    qd0: Float[Array, " n"]
    coordinates: tuple[str, ...] = eqx.field(static=True)

    def __check_init__(self):
        n = len(self.coordinates)
        for name in ("q0", "qd0"):
            shape = jnp.shape(getattr(self, name))
            if shape != (n,):
                raise ValueError(
                    f"Model: `{name}` must have shape ({n},) to match coordinates "
                    f"{self.coordinates}, got {shape}"
                )


def resolve_params(
    model: str, defaults: Mapping[str, object], overrides: Mapping[str, object]
) -> dict[str, Array]:
    """Merge keyword `overrides` into the `defaults` of the model named `model`.

    Values become inexact arrays of the default float dtype (float64 under
    `jax_enable_x64`); an unknown key or an override whose shape differs from the
    default's raises `ValueError` naming the key and the valid ones.
    """
    unknown = [k for k in overrides if k not in defaults]
    if unknown:
        raise ValueError(
            f"{model}: unknown parameter {unknown[0]!r}; valid parameters are "
            f"{', '.join(repr(k) for k in defaults)}"
        )
    dtype = jnp.result_type(float)
    params = {}
    for key, default in defaults.items():
        default = jnp.asarray(default, dtype=dtype)
        if key in overrides:
            value = jnp.asarray(overrides[key])
            # An explicit dtype also drops weak typing (Python floats), which would otherwise
            # make jitted code recompile when a default is overridden.
            keep = jnp.issubdtype(value.dtype, jnp.inexact)
            value = jnp.asarray(value, dtype=value.dtype if keep else dtype)
            if value.shape != default.shape:
                raise ValueError(
                    f"{model}: parameter {key!r} must have shape {default.shape}, got {value.shape}"
                )
            params[key] = value
        else:
            params[key] = default
    return params
