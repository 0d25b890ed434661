"""MuJoCo 4's actuator `damping`, `dampingpoly` and `armature` in `cx.rigid.from_mjcf`
(issue 21), against MuJoCo's own C engine on the same `MjModel` (contacts disabled).

What MuJoCo does (`mj_actuatorDamping`, `mj_actuatorArmature`, used by `mj_passive` and
`mj_crb`): every actuator with a joint transmission adds `gear[0]^2` times its damping
coefficients to the damping of the joint's degrees of freedom, and `gear[0]^2` times its
armature to their mass-matrix diagonal, summed over the actuators on one joint; the
damping force acts whether or not actuation (or the actuator's group) is enabled, and is
off with `mjDSBL_DAMPER`. References: `data.qfrc_damper` and `data.qfrc_actuator`,
`mj_fullM` and `data.qacc` after `mj_forward` (never an integrator's step: MuJoCo's Euler
integrates this damping implicitly), at random states and controls; gradients against
central finite differences. Errors are relative to the largest entry of the reference.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

mujoco = pytest.importorskip("mujoco")

from test_mjcf import _full_mass_matrix, _random_state, _xml  # noqa: E402

D = mujoco.mjtDisableBit

# A free root, a ball joint, two hinges and a slide with their own damping and armature;
# two actuators on one hinge (their contributions add), gears of both signs and != 1, the
# polynomial terms, an actuator in a group that `actuatorgroupdisable` may switch off.
ACT_XML = """
<mujoco model="reflected">
  <OPTION
  <option gravity="0.2 -0.1 -9.81"/>
  <worldbody>
    <body name="base" pos="0 0 1" quat="0.9 0.1 0.2 0.3">
      <freejoint name="root"/>
      <geom type="box" size=".2 .1 .05" mass="2"/>
      <body name="arm" pos="0.2 0 0">
        <joint name="h1" type="hinge" axis="0 1 1" damping="0.1" armature="0.02"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
        <body name="forearm" pos="0.4 0 0" euler="0 30 0">
          <joint name="s" type="slide" axis="1 0 0.2" stiffness="2" armature="0.03"/>
          <geom type="ellipsoid" size="0.1 0.05 0.03" pos="0.1 0 0" euler="10 20 30"/>
          <body name="hand" pos="0.2 0 0">
            <joint name="wrist" type="ball" damping="0.2" armature="0.01"/>
            <geom type="box" size="0.05 0.04 0.02" pos="0.05 0 0"/>
          </body>
        </body>
      </body>
      <body name="tail" pos="-0.2 0 0">
        <joint name="h2" type="hinge" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 -0.3 0 -0.1" size="0.02"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m1" joint="h1" gear="2.5" damping="0.3 0.2 0.1" armature="0.7"
           ctrlrange="-1 1" ctrllimited="true"/>
    <general name="g1" joint="h1" gear="-0.5" damping="0.6" armature="0.9" gaintype="affine"
             gainprm="1 0.2 0.1" biastype="affine" biasprm="0.1 -1 -0.2"/>
    <position name="p" joint="s" gear="-1.5" kp="20" kv="2" damping="0.4 0 0.3"
              armature="0.2" group="3"/>
    <velocity name="v" joint="h2" gear="3" kv="1.5" damping="0 0.5" armature="0.05"/>
  </actuator>
</mujoco>"""

# Hinges and a slide only (a cheaper compile for the default suite), the same kinds of
# actuators: two on one hinge, gears of both signs, polynomial damping.
CHAIN_XML = """
<mujoco model="reflected_chain">
  <OPTION
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="h1" type="hinge" axis="0 1 0" damping="0.1" armature="0.02"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 -0.3" size="0.05"/>
      <body name="b" pos="0.4 0 -0.3">
        <joint name="s" type="slide" axis="1 0 0.3" stiffness="2"/>
        <geom type="sphere" size="0.1"/>
        <body name="c" pos="0.1 0 -0.2">
          <joint name="h2" type="hinge" axis="1 0 0"/>
          <geom type="capsule" fromto="0 0 0 0 0.2 -0.3" size="0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m1" joint="h1" gear="2.5" damping="0.3 0.2 0.1" armature="0.7"/>
    <motor name="m2" joint="h1" gear="-0.5" damping="0.6" armature="0.9"/>
    <position name="p" joint="s" gear="-1.5" kp="20" kv="2" damping="0.4 0 0.3"
              armature="0.2" group="3"/>
    <velocity name="v" joint="h2" gear="3" kv="1.5" damping="0 0.5" armature="0.05"/>
  </actuator>
</mujoco>"""

MODELS = {"chain": CHAIN_XML, "free_ball": ACT_XML}

OPTIONS = {
    "plain": ("", 0),
    "group_disabled": ('<option actuatorgroupdisable="3"/>', 0),
    "actuation_disabled": ("", int(D.mjDSBL_ACTUATION)),
    "damper_disabled": ("", int(D.mjDSBL_DAMPER)),
}


def _model(option: str = "plain", model: str = "free_ball", bare: bool = False):
    """The model compiled by MuJoCo with `option`; `bare`: its actuators written without
    `damping` and `armature`."""
    if not hasattr(mujoco.MjModel, "actuator_armature"):
        pytest.skip("actuator damping and armature are MuJoCo 4's")
    xml, flags = OPTIONS[option]
    xml = MODELS[model].replace("<OPTION", xml)
    if bare:
        head, actuators = xml.split("<actuator>")
        xml = head + "<actuator>" + re.sub(r'\s(damping|armature)="[^"]*"', "", actuators)
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.disableflags |= int(D.mjDSBL_CONTACT) | flags
    return m


def _qvel_force(imported, q, Q):
    """A generalized force `Q` in constrax's coordinates as MuJoCo's `qfrc` (qvel space):
    $G^\\top Q$, $G = \\partial\\dot q/\\partial\\,$`qvel` (since $Q = E^\\top f$, $EG = I$)."""
    G = jax.jacfwd(lambda v: imported.tree.qd_from_qvel(q, v))(jnp.zeros(imported.tree.nv))
    return G.T @ Q


def _forward(imported):
    @jax.jit
    def forward(q, qd, p):
        qdd = cx.accelerations(imported.system, 0.0, q, qd, p).qdd
        Q = imported.system.force(0.0, q, qd, p)
        return (
            _qvel_force(imported, q, Q),
            imported.mujoco_mass_matrix(q, p),
            imported.mujoco_acceleration(q, qd, qdd),
        )

    return forward


def _rel(a, ref):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(ref))) / np.max(np.abs(ref)))


def _mujoco_states(m, imported, n, seed):
    """`n` random states and controls with MuJoCo's results after `mj_forward`: the damper
    plus actuator force, the full mass matrix and qacc."""
    data = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        qpos, qvel, ctrl = _random_state(m, imported, rng)
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, ctrl
        mujoco.mj_forward(m, data)
        refs = (
            data.qfrc_damper + data.qfrc_actuator,
            _full_mass_matrix(m, data),
            np.array(data.qacc),
        )
        out.append((qpos, qvel, ctrl, refs))
    return out


FAST = {("chain", "plain")}


@pytest.mark.parametrize(
    "model, option",
    [
        (mo, op) if (mo, op) in FAST else pytest.param(mo, op, marks=pytest.mark.slow)
        for mo in MODELS
        for op in OPTIONS
    ],
)
def test_damping_force_mass_matrix_and_qacc_match_mujoco(model, option):
    """Under `jax.jit`: the damping and actuator force, the mass matrix and qacc equal
    MuJoCo's. The comparison is sensitive to what it tests: with the actuators' damping and
    armature zeroed in `p`, the same program gives MuJoCo's results for the model written
    without them, and differs from the model's with them by far more than round-off."""
    m, bare = _model(option, model), _model(option, model, bare=True)
    imported = cx.rigid.from_mjcf(m)
    forward = _forward(imported)
    zeroed = dict(
        imported.params,
        actuator_damping=jnp.zeros(m.nu),
        actuator_dampingpoly=jnp.zeros((m.nu, 2)),
        actuator_armature=jnp.zeros(m.nu),
    )
    errs, errs_bare, changed = np.zeros(3), np.zeros(3), np.inf
    ours, theirs = _mujoco_states(m, imported, 5, 1), _mujoco_states(bare, imported, 5, 1)
    states = zip(ours, theirs, strict=True)
    for (qpos, qvel, ctrl, refs), (*_, bare_refs) in states:
        q, qd = imported.from_mujoco_state(qpos, qvel)
        u = jnp.asarray(ctrl)
        out, out_bare = (
            forward(q, qd, dict(imported.params, ctrl=u)),
            forward(q, qd, dict(zeroed, ctrl=u)),
        )
        errs = np.maximum(errs, [_rel(a, b) for a, b in zip(out, refs, strict=True)])
        errs_bare = np.maximum(
            errs_bare, [_rel(a, b) for a, b in zip(out_bare, bare_refs, strict=True)]
        )
        changed = min(changed, _rel(out_bare[1], refs[1]), _rel(out_bare[2], refs[2]))
    print(f"{model}, {option}: force {errs[0]:.1e}, M {errs[1]:.1e}, qacc {errs[2]:.1e}")
    assert np.all(errs <= 1e-12), errs
    assert np.all(errs_bare <= 1e-12), errs_bare
    assert changed > 1e-2


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
def test_tree_path_equals_the_lagrangian_path(model):
    """The tree dynamics (composite rigid body with the reflected armature) and autodiff of
    the imported Lagrangian ($\\tfrac12\\sum_k(a_k + \\sum_i g_i^2 a_i)v_k^2$) give the same
    accelerations."""
    m = _model(model=model)
    imported = cx.rigid.from_mjcf(m)
    system = imported.system
    reference = cx.System(system.lagrangian, system.constraints, system.force)

    @jax.jit
    def both(q, qd, p):
        a = cx.accelerations(system, 0.0, q, qd, p, constraint_solver=cx.KKT())
        b = cx.accelerations(reference, 0.0, q, qd, p, constraint_solver=cx.KKT())
        return a.qdd, b.qdd

    rng = np.random.default_rng(3)
    for _ in range(3):
        qpos, qvel, ctrl = _random_state(m, imported, rng)
        q, qd = imported.from_mujoco_state(qpos, qvel)
        ours, ref = both(q, qd, dict(imported.params, ctrl=jnp.asarray(ctrl)))
        assert _rel(ours, ref) <= 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
def test_vmap_over_states_matches_mujoco(model):
    m = _model(model=model)
    imported = cx.rigid.from_mjcf(m)
    states = _mujoco_states(m, imported, 4, seed=4)
    q, qd = imported.from_mujoco_state(
        np.stack([s[0] for s in states]), np.stack([s[1] for s in states])
    )
    ctrl = jnp.asarray(np.stack([s[2] for s in states]))
    forward = _forward(imported)
    batched = jax.jit(jax.vmap(lambda q, qd, u: forward(q, qd, dict(imported.params, ctrl=u))))
    out = batched(q, qd, ctrl)
    for k, (_, _, _, refs) in enumerate(states):
        for a, b in zip(out, refs, strict=True):
            assert _rel(a[k], b) <= 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("model", list(MODELS))
def test_gradients_equal_central_differences(model):
    """`jax.grad` of a scalar of MuJoCo's qacc with respect to the state (`q`, `qd`) and to
    the actuators' damping, polynomial damping and armature equals central differences."""
    m = _model(model=model)
    imported = cx.rigid.from_mjcf(m)
    rng = np.random.default_rng(5)
    qpos, qvel, ctrl = _random_state(m, imported, rng)
    q, qd = imported.from_mujoco_state(qpos, qvel)
    w = jnp.asarray(rng.normal(size=m.nv))
    names = ("actuator_damping", "actuator_dampingpoly", "actuator_armature")

    def scalar(q, qd, theta):
        p = dict(imported.params, ctrl=jnp.asarray(ctrl), **dict(zip(names, theta, strict=True)))
        qdd = cx.accelerations(imported.system, 0.0, q, qd, p).qdd
        return w @ imported.mujoco_acceleration(q, qd, qdd)

    theta = tuple(imported.params[n] for n in names)
    grads = jax.jit(jax.grad(scalar, argnums=(0, 1, 2)))(q, qd, theta)
    f = jax.jit(scalar)
    h = 1e-6
    args = [q, qd, theta]
    for which, g in enumerate(grads):
        leaves, tree = jax.tree.flatten(args[which])
        g_leaves = jax.tree.leaves(g)
        for i, (x, gx) in enumerate(zip(leaves, g_leaves, strict=True)):
            for idx in np.ndindex(*x.shape):
                shifted = []
                for s in (h, -h):
                    xs = list(leaves)
                    xs[i] = x.at[idx].add(s)
                    a = list(args)
                    a[which] = jax.tree.unflatten(tree, xs)
                    shifted.append(f(*a))
                fd = (shifted[0] - shifted[1]) / (2 * h)
                assert abs(float(gx[idx]) - float(fd)) <= 1e-6 * max(1.0, abs(float(fd))), (
                    which,
                    i,
                    idx,
                )
    assert all(np.abs(np.asarray(x)).max() > 0 for x in jax.tree.leaves(grads[2]))


def test_unsupported_transmissions_with_damping_or_armature_name_the_actuator():
    if not hasattr(mujoco.MjModel, "actuator_armature"):
        pytest.skip("actuator damping and armature are MuJoCo 4's")
    tendon = _xml(
        extra='<tendon><fixed name="t"><joint joint="j" coef="1"/></fixed></tendon>'
        '<actuator><motor name="a" tendon="t" armature="0.3"/></actuator>'
    )
    with pytest.raises(
        cx.rigid.MJCFError,
        match=r"actuator 'a': the damping and armature of a tendon transmission are not "
        r"converted \(a joint transmission's are\)",
    ):
        cx.rigid.from_mjcf(tendon)
    ball = ACT_XML.replace("<OPTION", "").replace(
        "</actuator>", '<motor name="w" joint="wrist" gear="1 0 0" damping="0.2"/></actuator>'
    )
    with pytest.raises(cx.rigid.MJCFError, match=r"actuator 'w': only joint transmissions"):
        cx.rigid.from_mjcf(ball)
