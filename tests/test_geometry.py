"""Geometry of constraint distributions: curl, Frobenius, singularities, accessibility.

References: sympy exterior derivatives, hand-derived Lie brackets, Briggs's (2016) snake cart
(singular exactly at phi = +-pi/2, eq. 1.2.4), Chow–Rashevskii on textbook examples.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

import constrax as cx
from constrax._accessibility import accessibility_rank, distribution_fields, lie_bracket
from constrax._geometry import (
    constraint_distribution,
    curl,
    find_singular_configurations,
    frobenius_residual,
    is_integrable,
)

KEY = jax.random.PRNGKey(3)


def L_free(t, q, qd, p):
    return 0.5 * qd @ qd


# --- one-forms -------------------------------------------------------------------------


def knife_edge(t, q, p):  # q = (x, y, theta): no side slip
    return jnp.array([-jnp.sin(q[2]), jnp.cos(q[2]), 0.0])


def heisenberg(t, q, p):  # zd = (x yd - y xd) / 2
    return jnp.array([q[1] / 2, -q[0] / 2, 1.0])


def rolling_disk(t, q, p):  # q = (x, y, theta, phi): xd = R cos th phid, yd = R sin th phid
    R = p["R"]
    th = q[2]
    return jnp.array([[1.0, 0.0, 0.0, -R * jnp.cos(th)], [0.0, 1.0, 0.0, -R * jnp.sin(th)]])


def g_exact(q):  # a function whose differential is the exact one-form
    return q[0] + q[1] ** 2 + jnp.sin(q[2])


def exact_form(t, q, p):
    return jax.grad(g_exact)(q)


def scaled_exact_form(t, q, p):  # f(q) dg with f = 2 + cos(x) y^2 + z^2 > 0
    f = 2.0 + jnp.cos(q[0]) * q[1] ** 2 + q[2] ** 2
    return f * jax.grad(g_exact)(q)


def mixed_integrable(t, q, p):  # rows M(q) (dg1, dg2) in R^4: ker = tangent of {g1=g2=c}
    g1 = lambda q: q[0] + q[1] * q[2]
    g2 = lambda q: q[3] - jnp.sin(q[0])
    G = jnp.stack([jax.grad(g1)(q), jax.grad(g2)(q)])
    M = jnp.array([[1.0 + q[2] ** 2, q[0]], [jnp.sin(q[1]), 2.0 + q[3] ** 2]])
    return M @ G


P_DISK = {"R": jnp.asarray(0.7)}


# --- curl ---------------------------------------------------------------------------------


def _sympy_curl(omega_exprs, qs):
    n = len(qs)
    return [
        [[sp.diff(w[j], qs[i]) - sp.diff(w[i], qs[j]) for j in range(n)] for i in range(n)]
        for w in omega_exprs
    ]


def test_curl_matches_sympy_exterior_derivative():
    x, y, th, ph, R = sp.symbols("x y theta phi R")
    rows = [[1, 0, 0, -R * sp.cos(th)], [0, 1, 0, -R * sp.sin(th)]]
    ref = sp.lambdify((x, y, th, ph, R), _sympy_curl(rows, [x, y, th, ph]))
    qs = jax.random.normal(KEY, (4, 4))
    system = cx.System(L_free, [cx.Pfaffian(rolling_disk)])
    f = jax.jit(jax.vmap(lambda q: curl(system, 0.0, q, P_DISK)))
    got = f(qs)
    for q, c in zip(np.asarray(qs), np.asarray(got), strict=True):
        np.testing.assert_allclose(c, np.array(ref(*q, 0.7), float), atol=1e-14)
    # The same curl from the one-form directly.
    np.testing.assert_allclose(curl(rolling_disk, 0.0, qs[0], P_DISK), got[0], atol=1e-15)


def test_curl_of_exact_and_holonomic_rows_vanishes():
    q = jax.random.normal(KEY, (3,))
    assert jnp.max(jnp.abs(curl(exact_form, 0.0, q))) < 1e-14
    system = cx.System(L_free, [cx.Holonomic(lambda t, q, p: g_exact(q))])
    assert jnp.max(jnp.abs(curl(system, 0.0, q))) < 1e-14


# --- Frobenius --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "omega, n, integrable",
    [
        (exact_form, 3, True),
        (scaled_exact_form, 3, True),
        (mixed_integrable, 4, True),
        (knife_edge, 3, False),
        (heisenberg, 3, False),
        (rolling_disk, 4, False),
    ],
    ids=[
        "dg",
        "f_dg_integrating_factor",
        "two_rows_combined",
        "knife_edge",
        "heisenberg",
        "rolling_disk",
    ],
)
def test_frobenius_exact_and_integrating_factor_integrable_nonholonomic_not(omega, n, integrable):
    q0 = jnp.linspace(0.3, 1.1, n)
    res = is_integrable(omega, 0.0, q0, P_DISK, key=KEY, num_samples=8)
    assert bool(res.integrable) is integrable
    assert res.residuals.shape[0] == 9
    if integrable:
        assert float(res.residual) < 1e-12
    else:
        assert float(res.residual) > 1e-2
        # the worst configuration and row are reported and really are the worst
        assert jnp.allclose(
            frobenius_residual(omega, 0.0, res.worst_configuration, P_DISK)[res.worst_row],
            res.residual,
        )


def test_frobenius_heisenberg_residual_closed_form():
    # dω = dy/2∧dx - dx/2∧dy = -dx∧dy; on ker ω the unit-area element projects with
    # factor |ω_z|/|ω| = 1/|ω|, so |dω(X, Y)|/|ω| over unit X, Y in D is 1/|ω|^2.
    q = jnp.array([0.4, -1.3, 2.0])
    w2 = 1.0 + (q[0] ** 2 + q[1] ** 2) / 4
    np.testing.assert_allclose(frobenius_residual(heisenberg, 0.0, q), [1.0 / w2], rtol=1e-12)


def test_frobenius_on_system_reports_row_names():
    # q = (x, y, theta, phi, z): rolling disk plus a holonomic z = x^2 (D has dimension 2)
    disk5 = lambda t, q, p: jnp.concatenate([rolling_disk(t, q[:4], p), jnp.zeros((2, 1))], 1)
    system = cx.System(
        L_free,
        [
            cx.Holonomic(lambda t, q, p: q[4] - q[0] ** 2, name="rod"),
            cx.Pfaffian(disk5, name="roll"),
        ],
    )
    res = is_integrable(system, 0.0, jnp.array([0.1, 0.2, 0.3, 0.4, 0.01]), P_DISK)
    assert res.row_names == ("rod[0]", "roll[0]", "roll[1]")
    assert not bool(res.integrable)


# --- the distribution ---------------------------------------------------------------


def test_distribution_basis_spans_kernel_and_is_orthonormal():
    q = jnp.array([0.1, -0.2, 0.9, 0.3])
    D = constraint_distribution(rolling_disk, 0.0, q, P_DISK)
    assert int(D.dimension) == 2 and int(D.rank) == 2
    B = D.kernel_basis()
    A = rolling_disk(0.0, q, P_DISK)
    np.testing.assert_allclose(A @ B, 0.0, atol=1e-14)
    np.testing.assert_allclose(B.T @ B, np.eye(2), atol=1e-14)
    # singular values of A: A A^T = [[1 + R^2 c^2, R^2 c s], [R^2 c s, 1 + R^2 s^2]]
    # has eigenvalues 1 and 1 + R^2.
    np.testing.assert_allclose(D.singular_values, [np.sqrt(1 + 0.49), 1.0], rtol=1e-13)


# --- singular configurations: the snake cart (Briggs 2016, §1.2) -------------------------------


def snake_cart_wheels(t, q, p):  # Briggs 2016, eq. (1.2.1), q = (x, y, theta, phi)
    x, y, th, ph = q
    h = p["l"] / 2 * jnp.cos(ph)
    return jnp.array(
        [
            [-jnp.sin(th + ph), jnp.cos(th + ph), h, 0.0],
            [jnp.sin(th - ph), -jnp.cos(th - ph), h, 0.0],
        ]
    )


def snake_cart():
    def L(t, q, qd, p):
        return (
            p["Jw"] * qd[3] ** 2
            + (0.5 * p["Jb"] + p["Jw"] + p["l"] ** 2 * p["mw"]) * qd[2] ** 2
            + (0.5 * p["mb"] + p["mw"]) * (qd[0] ** 2 + qd[1] ** 2)
        )

    p = {k: jnp.asarray(v) for k, v in dict(l=1.2, mb=2.0, mw=0.5, Jb=0.3, Jw=0.05).items()}
    return cx.System(L, [cx.Pfaffian(snake_cart_wheels, name="wheels")]), p


def test_snake_cart_singular_exactly_at_phi_pm_half_pi_on_grid():
    system, p = snake_cart()
    th = jnp.linspace(-np.pi, np.pi, 9)
    ph = jnp.linspace(-np.pi, np.pi, 17)  # contains -pi/2 and pi/2 (indices 4, 12)
    TH, PH = jnp.meshgrid(th, ph, indexing="ij")
    grid = jnp.stack([0.3 * jnp.ones(TH.size), -0.2 * jnp.ones(TH.size), TH.ravel(), PH.ravel()], 1)
    res = find_singular_configurations(system, 0.0, grid, p)
    expected = np.isclose(np.abs(np.asarray(grid[:, 3])), np.pi / 2, atol=1e-12)
    assert expected.sum() == 2 * 9
    np.testing.assert_array_equal(np.asarray(res.singular), expected)
    assert int(res.generic_dimension) == 2
    np.testing.assert_array_equal(np.asarray(res.dimension)[expected], 3)
    # both wheel rows degenerate (they coincide, eq. 1.2.4), and only at the singular points
    np.testing.assert_array_equal(np.asarray(res.degenerate_rows), expected[:, None] & [True, True])
    rep = res.report()
    assert len(rep) == 18 and rep[0][1] == ["wheels[0]", "wheels[1]"]
    np.testing.assert_allclose(np.abs(rep[0][0][3]), np.pi / 2, atol=1e-12)


def test_snake_cart_singularity_along_a_path():
    system, p = snake_cart()
    s = jnp.linspace(0.0, 1.0, 11)  # phi from 0 to pi: crosses pi/2 at s = 0.5
    path = jnp.stack([s, 2 * s, 0.5 + s, np.pi * s], 1)
    res = find_singular_configurations(system, 0.0, path, p)
    np.testing.assert_array_equal(np.flatnonzero(np.asarray(res.singular)), [5])
    # the smallest singular value vanishes like |cos phi| near the singularity
    assert float(res.singular_values[5, 1]) < 1e-12 < float(res.singular_values[4, 1])


# --- Lie brackets and accessibility -----------------------------------------------------


def test_lie_bracket_steer_and_drive_closed_form():
    steer = lambda q: jnp.array([0.0, 0.0, 1.0])
    drive = lambda q: jnp.array([jnp.cos(q[2]), jnp.sin(q[2]), 0.0])
    q = jnp.array([0.3, -0.1, 0.8])
    np.testing.assert_allclose(
        lie_bracket(steer, drive)(q), [-np.sin(0.8), np.cos(0.8), 0.0], atol=1e-15
    )
    # antisymmetry and [[X, Y], X] closed form: -(cos, sin, 0)
    np.testing.assert_allclose(lie_bracket(drive, steer)(q), -lie_bracket(steer, drive)(q))
    np.testing.assert_allclose(
        lie_bracket(steer, lie_bracket(steer, drive))(q),
        [-np.cos(0.8), -np.sin(0.8), 0.0],
        atol=1e-15,
    )


def test_distribution_fields_span_the_kernel():
    q = jnp.array([0.2, 0.1, -0.4, 0.6])
    fields = distribution_fields(rolling_disk, 0.0, q, P_DISK)
    assert len(fields) == 2
    for qq in (q, q + 0.3):  # they span D near q, not only at q
        V = jnp.stack([X(qq) for X in fields])
        np.testing.assert_allclose(V @ rolling_disk(0.0, qq, P_DISK).T, 0.0, atol=1e-14)
        assert np.linalg.matrix_rank(np.asarray(V), tol=1e-10) == 2


@pytest.mark.parametrize(
    "source, n, ranks",
    [
        (heisenberg, 3, [2, 3]),
        (knife_edge, 3, [2, 3]),
        (exact_form, 3, [2, 2, 2]),
        (scaled_exact_form, 3, [2, 2]),
        (rolling_disk, 4, [2, 3, 4]),
    ],
    ids=["heisenberg", "knife_edge", "dg", "f_dg", "rolling_disk_unicycle"],
)
def test_accessibility_heisenberg_and_knife_edge_full_at_depth_2_integrable_never(source, n, ranks):
    q = jnp.linspace(0.2, 0.9, n)
    res = accessibility_rank(source, 0.0, q, P_DISK, depth=len(ranks))
    np.testing.assert_array_equal(np.asarray(res.ranks_by_depth), ranks)
    assert bool(res.full) is (ranks[-1] == n)


def test_accessibility_of_a_system_and_of_user_fields():
    system = cx.System(L_free, [cx.Pfaffian(knife_edge)])
    q = jnp.array([0.0, 0.0, 0.3])
    assert bool(accessibility_rank(system, 0.0, q, depth=2).full)
    steer = lambda q: jnp.array([0.0, 0.0, 1.0])
    drive = lambda q: jnp.array([jnp.cos(q[2]), jnp.sin(q[2]), 0.0])
    res = accessibility_rank([steer, drive], 0.0, q, depth=2)
    np.testing.assert_array_equal(np.asarray(res.ranks_by_depth), [2, 3])


# --- errors -------------------------------------------------------------------------------


def test_geometry_errors_name_the_argument():
    speed = cx.System(
        L_free, [cx.VelocityConstraint(lambda t, q, qd, p: qd @ qd - 1.0, name="speed")]
    )
    with pytest.raises(ValueError, match="constraint 'speed' is a VelocityConstraint"):
        curl(speed, 0.0, jnp.zeros(2))
    with pytest.raises(ValueError, match=r"`q` must be a 1-D array"):
        curl(knife_edge, 0.0, jnp.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"must return shape \(k, n\) = \(k, 4\)"):
        curl(knife_edge, 0.0, jnp.zeros(4))
    with pytest.raises(ValueError, match=r"`qs` must be one configuration \(n,\) or a batch"):
        find_singular_configurations(knife_edge, 0.0, jnp.zeros((2, 3, 1)))
    with pytest.raises(ValueError, match=r"`generic_dimension` must lie in \[0, n\]"):
        find_singular_configurations(knife_edge, 0.0, jnp.zeros((2, 3)), generic_dimension=5)
    with pytest.raises(ValueError, match=r"`depth` must be an integer >= 1"):
        accessibility_rank(knife_edge, 0.0, jnp.zeros(3), depth=0)
    with pytest.raises(ValueError, match=r"vector field 0 must return shape \(n,\) = \(3,\)"):
        accessibility_rank([lambda q: q[:2]], 0.0, jnp.zeros(3))
    with pytest.raises(ValueError, match="`num_samples` must be at least 1"):
        is_integrable(knife_edge, 0.0, jnp.zeros(3), key=KEY, num_samples=0)
    with pytest.raises(ValueError, match="`atol` must be non-negative"):
        is_integrable(knife_edge, 0.0, jnp.zeros(3), atol=-1.0)
    with pytest.raises(TypeError, match="expected a cx.System or a one-form"):
        curl(3.0, 0.0, jnp.zeros(3))
