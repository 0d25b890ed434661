"""Bad input to `cx.rigid.FrictionalContact` / `cx.rigid.simulate_contacts`: every case
either runs or is refused naming the contact, the row or the argument at fault, eagerly
and under `jit`, `grad` and `vmap`.

References, none derived from the code under test: the geometry of a ball of radius
a = 0.1 whose centre is at height z (its lowest point is z - a above the plane) and moves
at velocity v (the contact point moves at v_z along the normal), and the skidding ball of
Coriolis (1835): it decelerates at mu_k g until its slip vanishes at t* = 2 v0 / (7 mu_k g).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import constrax as cx
import constrax.rigid as rg

G, V0, MU_K = 9.81, 3.0, 0.2
T_STAR = 2 * V0 / (7 * MU_K * G)
RUNTIME = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)
WHERE = r"cx\.rigid\.simulate_contacts: "

BALL = rg.RigidBody(1.0, jnp.full(3, 0.004), name="ball")  # radius 0.1, solid
SYSTEM = cx.System(
    lambda t, q, qd, p: BALL.kinetic_energy(q, qd) - G * q[2], [BALL.orientation_constraint()]
)
CONTACT = rg.FrictionalContact(
    BALL, rg.Sphere(0.1), static_friction=0.4, kinetic_friction=lambda p: p["mu_k"]
)
P = {"mu_k": jnp.asarray(MU_K)}


def _state(z=0.1, v=(V0, 0.0, 0.0), w=(0.0, 0.0, 0.0)):
    return BALL.state(
        jnp.array([0.0, 0.0, z]), jnp.eye(3), jnp.asarray(v, float), jnp.asarray(w, float)
    )


def _run(q0, qd0, mode, p=P, contact=CONTACT, **kw):
    kw.setdefault("t1", 1.0)
    return rg.simulate_contacts(SYSTEM, [contact], q0, qd0, p, modes=[mode], **kw)


# ----------------------------------------------------------------------------------------
# The contact's own rows at t0.


def test_ball_hovering_at_rest_declared_rolling_is_refused_naming_the_height_row():
    q0, qd0 = _state(z=0.5, v=(0.0, 0.0, 0.0))  # lowest point 0.4 above the plane
    with pytest.raises(
        ValueError,
        match=WHERE + r"contact 'ball'.*not on the plane.*"
        r"height row ball\.rolling\[0\].*initial_tolerance=1e-08",
    ):
        _run(q0, qd0, "rolling")


@pytest.mark.parametrize("z", [0.5, 0.05], ids=["above", "inside"])
def test_launched_ball_off_the_plane_declared_sliding_is_refused_naming_the_height_row(z):
    q0, qd0 = _state(z=z)  # lowest point 0.4 above, or 0.05 inside the plane
    with pytest.raises(ValueError, match=WHERE + r"contact 'ball'.*height row ball\.normal\[0\]"):
        _run(q0, qd0, "sliding")


def test_ball_moving_into_the_plane_is_refused_naming_the_normal_velocity_row():
    q0, qd0 = _state(v=(V0, 0.0, -1.0))  # the contact point moves at -1 along the normal
    with pytest.raises(
        ValueError,
        match=WHERE + r"contact 'ball'.*moves the contact point off the plane: its "
        r"normal-velocity row ball\.normal\[0\]",
    ):
        _run(q0, qd0, "sliding")


def test_rolling_ball_slipping_sideways_is_refused_naming_the_no_slip_row():
    q0, qd0 = _state(v=(0.0, 1.0, 0.0))  # sliding along y without spin: t2.v_c = 1
    with pytest.raises(
        ValueError,
        match=WHERE + r"contact 'ball' is declared 'rolling' but its contact point slips: its "
        r"no-slip row ball\.rolling\[2\]",
    ):
        _run(q0, qd0, "rolling")


def test_a_velocity_below_the_tolerance_is_accepted_as_the_systems_rows_are():
    """The rule of the system's own rows: |row| / max(1, |qd|) <= initial_tolerance."""
    q0, qd0 = _state(v=(V0, 0.0, -1e-9))  # 1e-9 / 3 < 1e-8: accepted, as it runs
    q0 = q0.at[2].add(5e-9)  # 5e-9 above: accepted
    out = _run(q0, qd0, "sliding", t1=0.1, throw=False)
    assert int(out.status) == 0


# ----------------------------------------------------------------------------------------
# Shape sizes.


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: rg.Sphere(-0.1), r"Sphere: `radius` must be finite and > 0, got -0\.1"),
        (lambda: rg.Sphere(0.0), r"Sphere: `radius` must be finite and > 0, got 0\.0"),
        (lambda: rg.Sphere(np.nan), r"Sphere: `radius` must be finite and > 0, got nan"),
        (lambda: rg.Disk(-0.3), r"Disk: `radius` must be finite and > 0, got -0\.3"),
        (lambda: rg.Sphere(jnp.ones(2)), r"Sphere: `radius` must be a scalar"),
    ],
)
def test_shape_sizes_not_positive_are_refused_naming_the_shape(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_radius_read_from_the_parameters_must_be_positive_naming_the_contact():
    contact = rg.FrictionalContact(
        BALL, rg.Sphere(lambda p: p["a"]), static_friction=0.4, kinetic_friction=0.2
    )
    q0, qd0 = _state()
    with pytest.raises(
        ValueError, match=WHERE + r"contact 'ball': the radius of its Sphere must be finite and > 0"
    ):
        _run(q0, qd0, "sliding", p={"a": jnp.asarray(-0.1)}, contact=contact)


# ----------------------------------------------------------------------------------------
# Arguments.


def test_wrong_length_q0_is_named_against_the_systems_coordinates():
    q0, qd0 = _state()
    with pytest.raises(
        ValueError,
        match=WHERE + r"`q0` must have shape \(n,\) = \(7,\), the system's number of "
        r"coordinates.*as `qd0` has\); got `q0` \(6,\), `qd0` \(7,\)",
    ):
        _run(q0[:6], qd0, "sliding")
    with pytest.raises(ValueError, match=WHERE + r"`qd0` must have shape \(n,\) = \(7,\)"):
        _run(q0, qd0[:6], "sliding")


def test_max_switches_zero_runs_until_the_first_switch_and_is_then_exhausted():
    q0, qd0 = _state()
    out = _run(q0, qd0, "sliding", t1=0.3, max_switches=0)  # t1 < t* = 0.437: no switch
    assert int(out.status) == 0 and int(out.num_switches) == 0
    assert out.switch_times.shape == (0,)
    # Skidding: v = v0 - mu_k g t.
    assert abs(float(out.qd_final[0]) - (V0 - MU_K * G * 0.3)) <= 1e-7
    with pytest.raises(RuntimeError, match=r"more than max_switches=0 mode switches"):
        _run(q0, qd0, "sliding", t1=1.0, max_switches=0)


# ----------------------------------------------------------------------------------------
# Under transformations.


@pytest.mark.slow
def test_height_row_is_refused_under_jit_grad_and_vmap_with_the_eager_message():
    match = r"contact 'ball': the initial state is not on the plane: its height row"

    def final_x(z):
        q0, qd0 = _state(z=z)
        return _run(q0, qd0, "sliding", max_switches=1).q_final[0]

    # Under `grad` the check's values (stop_gradient-ed) are concrete: the eager ValueError.
    for f, z, error in (
        (jax.jit(final_x), 0.5, RUNTIME),
        (jax.grad(final_x), 0.5, ValueError),
        (jax.jit(jax.grad(final_x)), 0.5, RUNTIME),
        (jax.vmap(final_x), jnp.array([0.1, 0.5]), RUNTIME),
    ):
        with pytest.raises(error, match=match):
            jax.block_until_ready(f(z))


@pytest.mark.slow
def test_grad_of_a_run_whose_initial_check_fails_raises_the_eager_message():
    q0, qd0 = _state(v=(0.0, 0.0, 0.0))  # at rest: no slip, declared sliding

    def final_x(p):
        return _run(q0, qd0, "sliding", p=p, max_switches=1).q_final[0]

    match = r"contact 'ball' is declared 'sliding' but its slip velocity is zero"
    with pytest.raises(ValueError, match=match):
        final_x(P)
    with pytest.raises(ValueError, match=match):
        jax.grad(final_x)(P)
    with pytest.raises(RUNTIME, match=match):
        jax.block_until_ready(jax.jit(jax.grad(final_x))(P))


@pytest.mark.slow
def test_jit_of_a_run_returning_the_trajectory_matches_the_closed_form():
    q0, qd0 = _state()
    out = jax.jit(lambda p: _run(q0, qd0, "sliding", p=p, max_switches=1))(P)
    assert isinstance(out, rg.ContactTrajectory)
    assert abs(float(out.switch_times[0]) - T_STAR) <= 1e-7
    assert abs(float(out.qd_final[0]) - 5 * V0 / 7) <= 1e-7
    assert out.contacts[0].name == "ball" and callable(out.contacts[0].kinetic_friction)


@pytest.mark.slow
def test_contact_built_inside_jit_on_a_traced_plane_normal_runs_and_checks_the_normal():
    q0, qd0 = _state()

    def final_v(normal):
        contact = rg.FrictionalContact(
            BALL,
            rg.Sphere(0.1),
            rg.Plane(normal=normal),
            static_friction=0.4,
            kinetic_friction=MU_K,
        )
        return _run(q0, qd0, "sliding", contact=contact, max_switches=1).qd_final[0]

    v = jax.jit(final_v)(jnp.array([0.0, 0.0, 1.0]))
    assert abs(float(v) - 5 * V0 / 7) <= 1e-7  # rolls on at 5 v0 / 7
    with pytest.raises((*RUNTIME, ValueError), match=r"Plane: `normal` must be a unit vector"):
        jax.block_until_ready(jax.jit(final_v)(jnp.array([0.0, 0.0, 2.0])))


@pytest.mark.parametrize(
    "which, match",
    [
        ("q0", r"`q0` has non-finite entries \(at \[\[2\]\]: \[nan\]\)"),
        ("qd0", r"`qd0` has non-finite entries \(at \[\[0\]\]: \[inf\]\)"),
    ],
)
def test_non_finite_initial_state_is_named_before_anything_compiles(which, match):
    q0, qd0 = _state()
    if which == "q0":
        q0 = q0.at[2].set(jnp.nan)
    else:
        qd0 = qd0.at[0].set(jnp.inf)
    with pytest.raises(ValueError, match=WHERE + match):
        _run(q0, qd0, "sliding")


def test_spherical_surface_radius_read_from_the_parameters_must_be_positive():
    # A ball of radius 0.1 on top of a sphere of radius R = 1 at the origin: a radius of
    # -1 read from the parameters used to run to the end with status 0.
    contact = rg.FrictionalContact(
        BALL,
        rg.Sphere(0.1),
        rg.SphericalSurface(lambda p: p["R"]),
        static_friction=0.4,
        kinetic_friction=0.2,
    )
    q0, qd0 = BALL.state(jnp.array([0.0, 0.0, 1.1]), jnp.eye(3), jnp.zeros(3), jnp.zeros(3))
    with pytest.raises(
        ValueError, match=WHERE + r"contact 'ball': the radius of the SphericalSurface"
    ):
        _run(q0, qd0, "rolling", p={"R": jnp.asarray(-1.0)}, contact=contact)
