"""The pieces of `benchmarks/trajopt.py`: its problems (`problems`), the runs of constrax
(`harness`) and CasADi (`casadi_side`) on them, and the report (`report`)."""
