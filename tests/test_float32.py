r"""float32 (the dtype GPU users run): every model of `cx.models` builds, simulates and
differentiates with the *default* options, and agrees with its float64 run.

The defaults scale with the dtype (`constrax._tolerances`, docs page "Precision"):
adaptive rtol = atol $\max(10^{-8}, 100\epsilon)$ = $1.2\times10^{-5}$, initial-state check
$1.2\times10^{-4}$, orthonormality $1.2\times10^{-4}$, pivot and rank cut-offs from
$\epsilon$. The float32 runs are made with x64 *off* (`jax.enable_x64(False)`), the float64
references with it on, in the same process. CI also runs this file with x64 off globally
(`CONSTRAX_TEST_X64=0`).

Bounds (relative to $\max(1, |x|_\infty)$ of the float64 value, over $t\in[0, 1]$): the
float32 state carries the integrator's tolerance $1.2\times10^{-5}$ accumulated over the
run plus rounding; we require $5\times10^{-4}$ for every model's final state, and
$5\times10^{-3}$ for the gradients (a reverse pass through the same steps, with the
adaptive step sequence itself differing between the precisions), relative to the largest
component of the float64 gradient: the reverse pass carries the integrator's *absolute*
error, so a component thousands of times smaller than the others cannot be resolved by
rtol $1.2\times10^{-5}$ whatever the precision. Measured on the tilted rolling disk
(t1 = 1, project_initial): d/dI1 is 1.140 in float64 at the float64 default rtol, 1.378 in
float64 at rtol $1.2\times10^{-5}$, 1.551 in float32, beside d/dc_roll = -3926.
Gradients are taken with `project_initial=True`: the initial state follows the
parameters onto their constraints (see `_run`).
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx

T1 = 1.0
STATE_BOUND = 5e-4
GRAD_BOUND = 5e-3

MODELS = [
    "snake_cart",
    "vertical_rolling_disk",
    "tilted_rolling_disk",
    "chaplygin_sleigh",
    "knife_edge",
    "kinematic_car",
    "ball_on_turntable",
    "disk_and_link",
    "pendulum_chain",
    "free_rigid_body",
    "bead_on_rotating_hoop",
    "nonholonomic_particle",
]
# The snake cart crosses its singular steering angle phi = pi/2 near t = 0.5; with the
# default Projection stabilisation its gradient is compared through the crossing.
GRADIENT_T1 = {}
# Gradients of the rigid models compile for long on 2 cores: those run with -m slow.
SLOW_GRADIENTS = {"tilted_rolling_disk", "ball_on_turntable", "disk_and_link", "free_rigid_body"}


def _run(name: str, x64: bool, gradient: bool):
    t1 = GRADIENT_T1.get(name, T1) if gradient else T1
    with jax.enable_x64(x64):
        model = getattr(cx.models, name)()
        dtype = jnp.float64 if x64 else jnp.float32
        assert model.q0.dtype == dtype, (name, model.q0.dtype)
        floats = {
            k: v
            for k, v in model.params.items()
            if jnp.issubdtype(jnp.asarray(v).dtype, jnp.floating)
        }

        def final_state(floats):
            p = {**model.params, **floats}
            # A parameter that moves the constraints (a radius) must carry the initial
            # state with it: with (q0, qd0) held fixed the derivative is that of an
            # inconsistent motion, which depends on the stabilisation and on the step
            # sequence (measured: 1.1% between rtol 1e-8 and 1.2e-5 on the turntable).
            traj = cx.simulate(
                model.system, model.q0, model.qd0, p, t1=t1, project_initial=gradient
            )
            return jnp.concatenate([traj.q[-1], traj.qd[-1]])

        x = final_state(floats)
        assert x.dtype == dtype
        out = {"state": np.asarray(x, np.float64)}
        if gradient:
            g = jax.grad(lambda f: jnp.sum(final_state(f) ** 2))(floats)
            out["grad"] = {k: np.asarray(v, np.float64) for k, v in g.items()}
        return out


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def _check(name, gradient):
    ref = _run(name, True, gradient)
    out = _run(name, False, gradient)
    err = _rel(out["state"], ref["state"])
    assert np.all(np.isfinite(out["state"]))
    assert err <= STATE_BOUND, f"{name}: float32 final state off by {err:.2e}"
    if gradient:
        scale = max(1.0, max(float(np.max(np.abs(g))) for g in ref["grad"].values()))
        for k in ref["grad"]:
            gerr = float(np.max(np.abs(out["grad"][k] - ref["grad"][k]))) / scale
            assert gerr <= GRAD_BOUND, f"{name}: float32 d/d{k} off by {gerr:.2e} of |grad|"


@pytest.mark.parametrize("name", MODELS)
def test_model_simulates_in_float32_with_default_options(name):
    _check(name, gradient=False)


@pytest.mark.parametrize("name", sorted(set(MODELS) - SLOW_GRADIENTS))
def test_model_differentiates_in_float32_with_default_options(name):
    _check(name, gradient=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW_GRADIENTS))
def test_rigid_model_differentiates_in_float32_with_default_options(name):
    _check(name, gradient=True)


def _fixed_step_batch(name: str, x64: bool, solver) -> np.ndarray:
    """Final states of a batch of four velocity scalings of the model's initial state,
    200 fixed steps of 1e-3 with `solver` and the default options (`vmap`, `jit`)."""
    with jax.enable_x64(x64):
        model = getattr(cx.models, name)()

        def run(scale):
            traj = cx.simulate(
                model.system, model.q0, model.qd0 * scale, model.params, t1=0.2, dt0=1e-3,
                solver=solver, stepsize_controller=diffrax.ConstantStepSize(),
                project_initial=True, max_steps=201,
            )  # fmt: skip
            return jnp.concatenate([traj.q[-1], traj.qd[-1]])

        out = jax.jit(jax.vmap(run))(jnp.linspace(0.5, 1.5, 4))
        assert out.dtype == (jnp.float64 if x64 else jnp.float32)
        return np.asarray(out, np.float64)


FIXED_STEP_SOLVERS = {"Euler": diffrax.Euler(), "SemiImplicitEuler": cx.SemiImplicitEuler()}
RIGID = {"tilted_rolling_disk", "ball_on_turntable", "disk_and_link", "free_rigid_body"}


@pytest.mark.parametrize("solver", sorted(FIXED_STEP_SOLVERS))
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in RIGID else n for n in MODELS]
)
def test_batched_fixed_step_rollout_runs_in_float32_as_in_float64(name, solver):
    # The batch user's case (issue: a float32 fixed-step rollout must never raise where the
    # float64 one runs): both precisions take the same steps, so the float32 state is the
    # float64 one up to the rounding of 200 steps.
    ref = _fixed_step_batch(name, True, FIXED_STEP_SOLVERS[solver])
    out = _fixed_step_batch(name, False, FIXED_STEP_SOLVERS[solver])
    assert np.all(np.isfinite(out))
    err = _rel(out, ref)
    assert err <= STATE_BOUND, f"{name}, {solver}: float32 off by {err:.2e}"


def test_imported_mjcf_model_runs_on_float32_states_in_a_float64_process():
    # Float32 states and parameters with x64 on: the imported force's constant
    # transmission coefficients used to promote it to float64 (the VJP then refused it).
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><joint name="j" type="hinge" axis="0 1 0" damping="0.1"/>'
        '<geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02"/></body></worldbody>'
        '<actuator><motor joint="j" gear="2"/></actuator></mujoco>'
    )
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    imported = cx.rigid.from_mjcf(m)

    def as_dtype(tree, dtype):
        floating = lambda v: np.issubdtype(np.asarray(v).dtype, np.floating)  # noqa: E731
        return jax.tree.map(lambda v: jnp.asarray(v, dtype) if floating(v) else v, tree)

    with jax.enable_x64(True):
        p = {
            k: (
                jnp.asarray(v, jnp.float32)
                if np.issubdtype(np.asarray(v).dtype, np.floating)
                else v
            )
            for k, v in dict(imported.params, ctrl=np.array([0.5])).items()
        }
        q, qd = jnp.array([0.3], jnp.float32), jnp.array([0.1], jnp.float32)
        out = cx.accelerations(imported.system, 0.0, q, qd, p)
        assert out.qdd.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(out.qdd)))
        ref = cx.accelerations(
            imported.system, 0.0, q.astype(jnp.float64), qd.astype(jnp.float64),
            as_dtype(p, jnp.float64),
        ).qdd  # fmt: skip
    np.testing.assert_allclose(out.qdd, ref, rtol=1e-5)
