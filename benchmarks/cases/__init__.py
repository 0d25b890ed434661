"""One module per benchmark case, constrax and the hand-written version side by side."""

from . import batched, chain, fit, particle, rolling_disk, snake, solvers, turntable

# Rollout cases: rollout, gradient, compile times, jaxpr counts (generic harness).
ROLLOUT_CASES = {
    c.name: c
    for c in (
        snake.CASE,
        particle.DALEMBERT,
        particle.VAKONOMIC,
        rolling_disk.CASE,
        turntable.CASE,
        chain.MAXIMAL,
        chain.MINIMAL,
    )
}

# Cases with their own measurements: module with `bench(cfg)`, `markdown(res, cfg)`, `counts()`.
OTHER_CASES = {"batched": batched, "solvers": solvers, "fit": fit}

# `--only` groups (a case's own name selects it too).
GROUPS = {
    "particle": ["particle_dalembert", "particle_vakonomic"],
    "rigid": ["rolling_disk", "turntable"],
    "chain": ["chain_maximal", "chain_minimal"],
}
