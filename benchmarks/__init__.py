"""constrax benchmarks: constrax vs the same physics hand-written in JAX (see README.md)."""
