r"""The armature and damping that the degrees of freedom of an imported tree carry: the
joints' own and what the actuators driving them reflect through their gears (MuJoCo 4's
actuator `armature` and `damping`; MuJoCo documentation, "Actuator", and
`mj_actuatorArmature`), read from the parameters.
"""

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


def actuator_reflected(p: dict, field: str, actuator_dofs, nv: int, dtype) -> Array:
    r"""What the actuators reflect onto the degrees of freedom they drive (MuJoCo 4's actuator
    `armature` and `damping`, MuJoCo's `mj_actuatorArmature` / `mj_actuatorDamping`):
    $\sum_{i:\,k(i) = k} g_i^2\,x_i$ at every dof $k$, with $k(i)$ = `actuator_dofs[i]` the
    dof of actuator $i$'s joint transmission, $g_i$ its gear `p["actuator_gear"][i, 0]` and
    $x_i$ = `p[field][i]` (a rotor of inertia $a$ behind a gear $g$ moves at $g v$: kinetic
    energy $\tfrac12 g^2 a v^2$; a damper $d$ there resists with $g\cdot d\,g v$). An
    actuator whose dof is $-1$ (a tendon transmission, whose damping and armature the import
    refuses) reflects nothing. Shape `(nv,) + p[field].shape[1:]`; a scalar zero where `p`
    has no `field` (older MuJoCo)."""
    x = p.get(field) if isinstance(p, dict) else None
    if x is None:
        return jnp.zeros((), dtype)
    dofs = np.asarray(actuator_dofs, np.int64).reshape(-1)
    joint = np.flatnonzero(dofs >= 0)
    if joint.size == 0:
        return jnp.zeros((nv,) + jnp.shape(x)[1:], dtype)
    x = jnp.asarray(x, dtype)
    gear2 = jnp.asarray(p["actuator_gear"], dtype)[:, 0] ** 2
    scaled = x * gear2.reshape((-1,) + (1,) * (x.ndim - 1))
    if joint.size < dofs.size:
        scaled, dofs = scaled[joint], dofs[joint]
    return jnp.zeros((nv,) + x.shape[1:], dtype).at[dofs].add(scaled)


def dof_armature(p: dict, actuator_dofs, nv: int, dtype) -> Float[Array, " nv"]:
    r"""The armature on MuJoCo's mass-matrix diagonal: the joints' own, `p["dof_armature"]`,
    plus the actuators' reflected $g_i^2 a_i$ (`p["actuator_armature"]`, MuJoCo 4)."""
    own = jnp.asarray(p["dof_armature"], dtype)
    return own + actuator_reflected(p, "actuator_armature", actuator_dofs, nv, dtype)
