"""The shapes of the classical tops: the sphere whose centre is off the centre of mass (the
tippe top) and the ellipsoid (the rattleback), `cx.rigid.Sphere(radius, centre=...)` and
`cx.rigid.Ellipsoid(semi_axes, centre=...)`.

References, none derived from the code under test:

* the lowest point of a shape: a brute-force minimum of $n\\cdot x$ over points of its
  surface (dense sampling refined by `scipy.optimize.minimize` in two coordinates of the
  surface); the time derivative of the contact height: central finite differences;
* the rattleback's spin reversal one way and steady spin the other (Kane & Levinson 1982,
  "Realistic mathematical modeling of the rattleback", Int. J. Non-Linear Mech. 17,
  175-186; Garcia & Hubbard 1988, "Spin reversal of the rattleback: theory and
  experiment", Proc. R. Soc. Lond. A 418, 165-197), with Kane & Levinson's rattleback
  (the parameters as the Autolev rattleback sample problem lists them);
* the tippe top's inversion criterion $1 - \\alpha < I_1/I_3 < 1 + \\alpha$ (centre of mass a
  distance $\\alpha R$ from the centre of the sphere of radius $R$), as stated by Bou-Rabee,
  Marsden & Romero 2004, "Tippe top inversion as a dissipation-induced instability" (SIAM
  J. Appl. Dyn. Syst. 3, 352-377) and Rauch-Wojciechowski & Rutstam 2014, "Dynamics of an
  inverting tippe top" (SIGMA 10, 017);
* derivatives: central finite differences.
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.spatial.transform import Rotation

import constrax as cx
import constrax.rigid as rg

G = 9.81
EZ = jnp.array([0.0, 0.0, 1.0])

# ----------------------------------------------------------------------------------------
# Kinematics: the lowest point against a brute-force minimum over the surface.

BODY = rg.RigidBody(1.0, jnp.array([1e-3, 2e-3, 2.5e-3]), name="top")
SHAPES = {
    "offset sphere": (rg.Sphere(0.3, centre=(0.05, -0.02, 0.1)), (0.3, 0.3, 0.3)),
    "ellipsoid": (rg.Ellipsoid((0.4, 0.15, 0.25), centre=(0.03, 0.0, -0.05)), (0.4, 0.15, 0.25)),
}


def _fibonacci_sphere(k: int) -> np.ndarray:
    i = np.arange(k) + 0.5
    z = 1.0 - 2.0 * i / k
    phi = np.pi * (1.0 + 5**0.5) * i
    s = np.sqrt(1.0 - z * z)
    return np.stack([s * np.cos(phi), s * np.sin(phi), z], axis=1)


def _brute_lowest(R, n, centre, axes):
    """min over the surface {c + a*u : |u| = 1} of n.(R (c + a*u)), by dense sampling of u
    refined by BFGS in two tangent coordinates around the best sample: (the minimum, the
    spatial point R(c + a*u))."""
    R, n, c, a = (np.asarray(x, float) for x in (R, n, centre, axes))
    U = _fibonacci_sphere(40_000)
    u0 = U[np.argmin((c + a * U) @ R.T @ n)]
    e1 = np.cross(u0, [1.0, 0.0, 0.0] if abs(u0[0]) < 0.9 else [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(u0, e1)

    def point(st):
        u = u0 + st[0] * e1 + st[1] * e2
        return c + a * u / np.linalg.norm(u)

    res = minimize(
        lambda st: n @ R @ point(st), np.zeros(2), method="BFGS", options={"gtol": 1e-13}
    )
    return float(res.fun), R @ point(res.x)


def _pose(seed):
    rng = np.random.default_rng(seed)
    R = Rotation.random(random_state=seed).as_matrix()
    n = rng.normal(size=3)
    return rng, R, n / np.linalg.norm(n)


@pytest.mark.parametrize("name", list(SHAPES))
def test_lowest_point_is_the_brute_force_minimum_over_the_surface(name):
    shape, axes = SHAPES[name]
    for seed in range(5):
        rng, R, n = _pose(seed)
        r = rng.normal(size=3)
        q, _ = BODY.state(jnp.asarray(r), jnp.asarray(R), jnp.zeros(3), jnp.zeros(3))
        plane = rg.Plane(normal=jnp.asarray(n), height=0.1)
        lowest, point = _brute_lowest(R, n, shape.centre, axes)
        delta = rg.contact_offset(BODY, shape, plane, q, None)
        np.testing.assert_allclose(np.asarray(delta), point, atol=1e-6)
        # The contact height row: n.(r + Delta) - h.
        g = rg.plane_contact(BODY, shape, plane).g(0.0, q, None)
        np.testing.assert_allclose(float(g[0]), n @ r + lowest - 0.1, atol=1e-10)
        np.testing.assert_allclose(float(n @ delta), lowest, atol=1e-10)


@pytest.mark.parametrize("name", list(SHAPES))
def test_height_rows_velocity_form_is_the_time_derivative_of_the_height(name):
    """The velocity form n.(v + omega x Delta) that `plane_contact` hands to the engine is
    d/dt of the height along a motion r(t) = r + tv, R(t) = exp(t hat(omega)) R."""
    shape, _ = SHAPES[name]
    plane = rg.Plane(normal=jnp.asarray([0.3, -0.2, 1.0]) / np.sqrt(1.13))
    con = rg.plane_contact(BODY, shape, plane)
    assert shape.offset_follows_orientation and con.velocity is not None
    for seed in range(3):
        rng, R, _ = _pose(seed)
        r, v, w = (rng.normal(size=3) for _ in range(3))

        def q_at(t, r=r, v=v, w=w, R=R):
            Rt = Rotation.from_rotvec(t * w).as_matrix() @ R
            return BODY.state(jnp.asarray(r + t * v), jnp.asarray(Rt), jnp.zeros(3), jnp.zeros(3))

        q, _ = q_at(0.0)
        _, qd = BODY.state(jnp.asarray(r), jnp.asarray(R), jnp.asarray(v), jnp.asarray(w))
        h = 1e-5
        fd = (con.g(0.0, q_at(h)[0], None) - con.g(0.0, q_at(-h)[0], None)) / (2 * h)
        np.testing.assert_allclose(
            np.asarray(con.velocity(0.0, q, qd, None)), np.asarray(fd), rtol=0, atol=1e-8
        )


def test_a_sphere_centred_at_the_centre_of_mass_keeps_the_linear_height_row():
    for shape in (rg.Sphere(0.1), rg.Sphere(0.1, centre=(0.0, 0.0, 0.0))):
        assert not shape.offset_follows_orientation
        assert rg.plane_contact(BODY, shape).velocity is None
    assert rg.Sphere(0.1, centre=(0.0, 0.0, 0.02)).offset_follows_orientation


# ----------------------------------------------------------------------------------------
# The rattleback: spin reversal while rolling without slipping.

# Kane & Levinson 1982: semi-axes 0.20, 0.03, 0.02 m; centre of mass h = 0.01 m below the
# ellipsoid's centre on its short axis; m = 1 kg; inertia about the centre of mass in the
# ellipsoid's axes A = 2e-4, B = 1.6e-3, C = 1.7e-3 kg m^2 with the product of inertia
# D = 2e-5 kg m^2 (the tensor's (x, y) entry -D) that turns the inertia axes about the
# vertical against the shape's axes by (1/2) atan(2D / (B - A)) = 0.8 degrees.
RATTLEBACK = rg.RigidBody(
    1.0, jnp.array([[2e-4, -2e-5, 0.0], [-2e-5, 1.6e-3, 0.0], [0.0, 0.0, 1.7e-3]]), name="celt"
)
CELT = rg.Ellipsoid(lambda p: p["axes"], centre=(0.0, 0.0, 0.01))


def _celt_lagrangian(t, q, qd, p):
    return RATTLEBACK.kinetic_energy(q, qd) - G * RATTLEBACK.position(q)[2]


CELT_SYSTEM = cx.System(
    _celt_lagrangian, [RATTLEBACK.orientation_constraint(), *rg.rolling_contact(RATTLEBACK, CELT)]
)
CELT_P = {"axes": jnp.array([0.2, 0.03, 0.02])}


def _celt_state(p, spin, tilt=(0.5, 0.5)):
    """At rest on the plane but for a spin about the vertical, tilted by `tilt` degrees
    about x and y, its contact point at the origin and rolling (v = -omega x Delta)."""
    R = jnp.asarray(Rotation.from_euler("xy", tilt, degrees=True).as_matrix())
    q, _ = RATTLEBACK.state(jnp.zeros(3), R, jnp.zeros(3), jnp.zeros(3))
    delta = CELT.contact_offset(RATTLEBACK, q, EZ, p)
    w = spin * EZ
    return RATTLEBACK.state(-delta, R, -jnp.cross(w, delta), w)


def _celt_energy(traj):
    def E(q, qd):
        return RATTLEBACK.kinetic_energy(q, qd) + G * RATTLEBACK.position(q)[2]

    return np.asarray(jax.vmap(E)(traj.q, traj.qd))


@pytest.fixture(scope="module")
def celt_runs():
    ts = jnp.linspace(0.0, 4.0, 81)
    out = {}
    for spin in (-1.0, 1.0):
        q0, qd0 = _celt_state(CELT_P, spin)
        out[spin] = cx.simulate(
            CELT_SYSTEM,
            q0,
            qd0,
            CELT_P,
            t1=4.0,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-9),
        )
    return out


@pytest.mark.slow
def test_rattleback_spun_the_wrong_way_reverses_and_the_other_way_does_not(celt_runs):
    """Spun at -1 rad/s about the vertical it rocks, stops and spins the other way within
    4 s; spun at +1 rad/s it keeps its direction (Kane & Levinson 1982; Garcia & Hubbard
    1988). Which direction reverses is set by the sign of the product of inertia."""
    wz = {
        s: np.asarray(jax.vmap(RATTLEBACK.angular_velocity)(t.q, t.qd))[:, 2]
        for s, t in celt_runs.items()
    }
    assert wz[-1.0][0] < 0 and wz[-1.0][-1] > 0.5  # reversed, and spinning the other way
    assert np.all(wz[1.0] > 0.5)  # the preferred direction: no reversal
    # The reversal is a rocking motion's doing: the tilt grows beyond its initial 0.71°.
    tilt = np.degrees(
        np.arccos(
            np.asarray(jax.vmap(lambda q: RATTLEBACK.rotate(q, EZ)[2])(celt_runs[-1.0].q)).clip(
                -1, 1
            )
        )
    )
    assert tilt[0] < 0.71 and tilt.max() > 1.2


@pytest.mark.slow
def test_rattleback_rolling_conserves_energy(celt_runs):
    """Rolling without slipping does no work: E = T + V stays constant to 1e-8 of itself
    (the integrator's tolerances are 1e-9)."""
    for traj in celt_runs.values():
        E = _celt_energy(traj)
        assert np.max(np.abs(E - E[0])) <= 1e-8 * abs(E[0])


@pytest.mark.slow
def test_rattleback_in_simulate_contacts_rolling_follows_the_rolling_system(celt_runs):
    """The same rattleback as a `FrictionalContact` in the rolling mode of
    `simulate_contacts` (mu_s = 10: the friction cone is never left) follows the
    `rolling_contact` system of `cx.simulate` through its reversal: q and qd to 1e-5 (both
    integrated to tolerances 1e-9; the rocking amplifies their difference to about 2e-6)."""
    contact = rg.FrictionalContact(
        RATTLEBACK, CELT, static_friction=10.0, kinetic_friction=10.0, name="celt"
    )
    q0, qd0 = _celt_state(CELT_P, -1.0)
    ts = celt_runs[-1.0].ts
    out = rg.simulate_contacts(
        cx.System(_celt_lagrangian, [RATTLEBACK.orientation_constraint()]),
        [contact],
        q0,
        qd0,
        CELT_P,
        modes=["rolling"],
        t1=4.0,
        ts=ts,
        stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-9),
        max_switches=1,
        max_steps=20_000,
    )
    assert int(out.status) == 0 and int(out.num_switches) == 0
    np.testing.assert_allclose(np.asarray(out.q), np.asarray(celt_runs[-1.0].q), atol=1e-5)
    np.testing.assert_allclose(np.asarray(out.qd), np.asarray(celt_runs[-1.0].qd), atol=1e-5)


@pytest.mark.slow
def test_gradient_of_a_rolling_run_wrt_a_semi_axis_matches_finite_differences():
    """d(omega_x at t = 0.1)/d(vertical semi-axis c), reverse mode through fixed steps, against
    central differences of the same discretisation."""

    def spin_at_end(c):
        p = {"axes": jnp.stack([0.2, 0.03, c])}
        q0, qd0 = _celt_state(p, -1.0, tilt=(2.0, 2.0))
        traj = cx.simulate(
            CELT_SYSTEM,
            q0,
            qd0,
            p,
            t1=0.1,
            dt0=2e-3,
            stepsize_controller=diffrax.ConstantStepSize(),
            saveat=diffrax.SaveAt(t1=True),
        )
        return RATTLEBACK.angular_velocity(traj.q[-1], traj.qd[-1])[0]

    c = jnp.asarray(0.02)
    grad = float(jax.grad(spin_at_end)(c))
    h = 1e-6
    fd = float((spin_at_end(c + h) - spin_at_end(c - h)) / (2 * h))
    assert np.isfinite(grad) and abs(fd) > 1e-3
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


# ----------------------------------------------------------------------------------------
# The tippe top: inversion while sliding.

# An eccentric sphere (Bou-Rabee, Marsden & Romero 2004): radius R = 0.02 m, centre of mass
# a distance alpha R = 0.006 m below the sphere's centre on the symmetry axis (body e_3),
# m = 1 kg, I_3 = (2/5) m R^2, I_1 = I_2 = gamma I_3 with gamma = I_1/I_3 read from the
# parameters; Coulomb friction mu_s = mu_k = 0.6 (a rough table: the inversion takes 0.3 s
# instead of seconds). The criterion 1 - alpha < gamma < 1 + alpha is 0.7 < gamma < 1.3.
TOP_R, TOP_ALPHA, TOP_M = 0.02, 0.3, 1.0
TOP_I3 = 0.4 * TOP_M * TOP_R**2
TOP = rg.RigidBody(TOP_M, jnp.full(3, TOP_I3), name="top")


def _top_body(p):
    return TOP.with_parameters(TOP_M, jnp.stack([p["gamma"] * TOP_I3, p["gamma"] * TOP_I3, TOP_I3]))


def _top_lagrangian(t, q, qd, p):
    return _top_body(p).kinetic_energy(q, qd) - TOP_M * G * TOP.position(q)[2]


TOP_SYSTEM = cx.System(_top_lagrangian, [TOP.orientation_constraint()])
TOP_SHAPE = rg.Sphere(TOP_R, centre=(0.0, 0.0, TOP_ALPHA * TOP_R))
TOP_CONTACT = rg.FrictionalContact(TOP, TOP_SHAPE, static_friction=0.6, kinetic_friction=0.6)
TOP_SPIN, TOP_TILT = 150.0, 0.3  # rad/s about the vertical; rad of the axis from the vertical


def _top_state():
    """Spinning about the vertical through the centre of mass, the axis tilted by TOP_TILT,
    the sphere touching the plane: its contact point slides (slip speed 0.27 m/s)."""
    c, s = np.cos(TOP_TILT), np.sin(TOP_TILT)
    R = jnp.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    q, _ = TOP.state(jnp.zeros(3), R, jnp.zeros(3), jnp.zeros(3))
    delta = TOP_SHAPE.contact_offset(TOP, q, EZ, None)
    return TOP.state(-delta, R, jnp.zeros(3), TOP_SPIN * EZ)


def _cos_tilt(out):
    return np.asarray(jax.vmap(lambda q: TOP.rotate(q, EZ)[2])(out.q))


@pytest.fixture(scope="module")
def tippe_runs():
    """gamma = 1.0 (inside the range) for 0.4 s; gamma = 0.6 (below it) for 0.025 s, while
    it rights itself (see `test_tippe_top_outside_the_range_rights_itself`)."""
    q0, qd0 = _top_state()
    runs = {}
    for gamma, t1 in ((1.0, 0.4), (0.6, 0.025)):
        runs[gamma] = rg.simulate_contacts(
            TOP_SYSTEM,
            [TOP_CONTACT],
            q0,
            qd0,
            {"gamma": jnp.asarray(gamma)},
            modes=["sliding"],
            t1=t1,
            ts=jnp.linspace(0.0, t1, 41),
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
            max_switches=64,
            max_steps=20_000,
        )
    return runs


def test_tippe_top_spin_is_above_the_jellett_threshold():
    """Rauch-Wojciechowski & Rutstam 2014: the top inverts (for 1 - alpha^2 < gamma < 1)
    when Jellett's integral lambda = -L.a (L the angular momentum about the centre of mass,
    a the offset of the contact point) exceeds sqrt(m g R^3 I_3 alpha) (1 + alpha)^2 /
    sqrt(1 + alpha - gamma); the initial state of the runs below is above it for gamma = 1."""
    q0, qd0 = _top_state()
    p = {"gamma": jnp.asarray(1.0)}
    body = _top_body(p)
    R = np.asarray(jax.vmap(lambda e: TOP.rotate(q0, e))(jnp.eye(3))).T
    L = R @ np.asarray(body.inertia) @ R.T @ np.asarray(TOP.angular_velocity(q0, qd0))
    lam = -L @ np.asarray(TOP_SHAPE.contact_offset(TOP, q0, EZ, None))
    a, g = TOP_ALPHA, 1.0
    thres = np.sqrt(TOP_M * G * TOP_R**3 * TOP_I3 * a) * (1 + a) ** 2 / np.sqrt(1 + a - g)
    assert lam > 1.2 * thres


@pytest.mark.slow
def test_tippe_top_inside_the_range_inverts_sliding(tippe_runs):
    """gamma = 1 in (1 - alpha, 1 + alpha): the axis turns past horizontal within 0.4 s, the
    centre of mass rising above the sphere's centre; the normal reaction stays positive
    (no lift-off: status 0) and friction only dissipates."""
    out = tippe_runs[1.0]
    assert int(out.status) == 0
    cos = _cos_tilt(out)
    assert cos[0] > 0.95 and cos[-1] < -0.5
    # The centre of mass above the sphere's centre: the height of R X_c is negative.
    centre = jnp.array([0.0, 0.0, TOP_ALPHA * TOP_R])
    above = np.asarray(jax.vmap(lambda q: TOP.rotate(q, centre)[2])(out.q))
    assert above[0] > 0 and above[-1] < -0.5 * TOP_ALPHA * TOP_R
    E = np.asarray(out.energy())
    assert np.all(np.diff(E) <= 1e-9 * E[0]) and E[-1] < E[0]


@pytest.mark.slow
def test_tippe_top_outside_the_range_rights_itself(tippe_runs):
    """gamma = 0.6 < 1 - alpha: the upright (non-inverted) state is stable; the same top,
    spun the same way, rights itself instead (its tilt falls from 0.3 rad to under 0.2)
    while the inverting one has not (yet) tilted less. Friction only dissipates.

    Not checked further: the upright top's slip then turns as it vanishes and the top
    rolls (at 0.035 s), then alternates between rolling and sliding, and a slip that
    starts from zero across the direction rolling's friction gives it, barely leaving the
    cone, makes the run stiff until its steps run out (at 0.081 s; docs page "Rolling or
    sliding", "Shapes: the classical tops")."""
    out = tippe_runs[0.6]
    assert int(out.status) == 0
    cos = _cos_tilt(out)
    assert np.all(cos >= cos[0] - 1e-6) and cos[-1] > np.cos(0.2)
    inverting = _cos_tilt(tippe_runs[1.0])[:11]  # t <= 0.1: still tilting further
    assert np.all(inverting <= cos[0] + 1e-3)
    E = np.asarray(out.energy())
    assert np.all(np.diff(E) <= 1e-9 * E[0])


# ----------------------------------------------------------------------------------------
# Bad input.


@pytest.mark.parametrize(
    "make, error, match",
    [
        (
            lambda: rg.Ellipsoid((0.2, 0.0, 0.1)),
            ValueError,
            r"Ellipsoid: `semi_axes` must be finite and > 0",
        ),
        (
            lambda: rg.Ellipsoid((0.2, -0.1, 0.1)),
            ValueError,
            r"Ellipsoid: `semi_axes` must be finite and > 0",
        ),
        (
            lambda: rg.Ellipsoid((0.2, np.inf, 0.1)),
            ValueError,
            r"Ellipsoid: `semi_axes` must be finite and > 0",
        ),
        (
            lambda: rg.Ellipsoid((0.2, np.nan, 0.1)),
            ValueError,
            r"Ellipsoid: `semi_axes` must be finite and > 0",
        ),
        (
            lambda: rg.Ellipsoid((0.2, 0.1)),
            ValueError,
            r"Ellipsoid: `semi_axes` must have shape \(3,\), got \(2,\)",
        ),
        (
            lambda: rg.Ellipsoid(object()),
            TypeError,
            r"Ellipsoid: `semi_axes` must be a 3-sequence, a \(3,\) array or a callable",
        ),
        (
            lambda: rg.Ellipsoid((1.0, 1.0, 1.0), centre=(0.0, 1.0)),
            ValueError,
            r"Ellipsoid: `centre` must be a 3-vector of shape \(3,\), got \(2,\)",
        ),
        (
            lambda: rg.Ellipsoid((1.0, 1.0, 1.0), centre=(0.0, np.nan, 0.0)),
            ValueError,
            r"Ellipsoid: `centre` must be finite",
        ),
        (
            lambda: rg.Sphere(0.1, centre=np.zeros((3, 1))),
            ValueError,
            r"Sphere: `centre` must be a 3-vector of shape \(3,\), got \(3, 1\)",
        ),
        (
            lambda: rg.Sphere(-0.1, centre=(0.0, 0.0, 0.02)),
            ValueError,
            r"Sphere: `radius` must be finite and > 0, got -0\.1",
        ),
        (
            lambda: rg.Sphere(np.inf, centre=(0.0, 0.0, 0.02)),
            ValueError,
            r"Sphere: `radius` must be finite and > 0, got inf",
        ),
    ],
    ids=[
        "ellipsoid-zero-axis",
        "ellipsoid-negative-axis",
        "ellipsoid-inf-axis",
        "ellipsoid-nan-axis",
        "ellipsoid-two-axes",
        "ellipsoid-not-an-array",
        "ellipsoid-centre-shape",
        "ellipsoid-centre-nan",
        "sphere-centre-shape",
        "offset-sphere-negative-radius",
        "offset-sphere-inf-radius",
    ],
)
def test_bad_shape_sizes_are_refused_naming_the_shape_and_argument(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_a_contact_refuses_a_shape_it_does_not_know():
    with pytest.raises(TypeError, match="cx.rigid.Sphere, cx.rigid.Disk, cx.rigid.Ellipsoid"):
        rg.FrictionalContact(BODY, 0.1, static_friction=0.5, kinetic_friction=0.3)


WHERE = r"cx\.rigid\.simulate_contacts: "


@pytest.mark.parametrize(
    "shape, p, match",
    [
        (
            rg.Ellipsoid(lambda p: p["axes"], centre=(0.0, 0.0, 0.01)),
            {"axes": jnp.array([0.2, -0.03, 0.02])},
            WHERE + r"contact 'celt': the semi_axes of its Ellipsoid must be finite and > 0",
        ),
        (
            rg.Ellipsoid(lambda p: p["axes"], centre=(0.0, 0.0, 0.01)),
            {"axes": jnp.array([0.2, jnp.nan, 0.02])},
            WHERE + r"contact 'celt': the semi_axes of its Ellipsoid must be finite and > 0",
        ),
        (
            rg.Ellipsoid(lambda p: p["axes"], centre=(0.0, 0.0, 0.01)),
            {"axes": jnp.array([0.2, 0.03])},
            r"Ellipsoid: `semi_axes` must have shape \(3,\), got \(2,\)",
        ),
        (
            rg.Sphere(lambda p: p["a"], centre=(0.0, 0.0, 0.01)),
            {"a": jnp.asarray(jnp.inf)},
            WHERE + r"contact 'celt': the radius of its Sphere must be finite and > 0",
        ),
        (
            rg.Sphere(lambda p: p["a"], centre=(0.0, 0.0, 0.01)),
            {"a": jnp.asarray(0.0)},
            WHERE + r"contact 'celt': the radius of its Sphere must be finite and > 0",
        ),
    ],
    ids=[
        "ellipsoid-negative-axis",
        "ellipsoid-nan-axis",
        "ellipsoid-two-axes",
        "offset-sphere-inf-radius",
        "offset-sphere-zero-radius",
    ],
)
def test_sizes_read_from_the_parameters_are_checked_at_simulate_contacts(shape, p, match):
    contact = rg.FrictionalContact(RATTLEBACK, shape, static_friction=0.5, kinetic_friction=0.3)
    q0, qd0 = _celt_state(CELT_P, 1.0)
    with pytest.raises(ValueError, match=match):
        rg.simulate_contacts(
            cx.System(_celt_lagrangian, [RATTLEBACK.orientation_constraint()]),
            [contact],
            q0,
            qd0,
            p,
            modes=["rolling"],
            t1=0.1,
        )
