"""The numbers of a derived system's flow: its field on NumPy and on JAX (``vector_field``) and the field's exact
Jacobian (``jacobian``). They take the compiled formulas of a ``System`` and know nothing of solvers, so the
System's own checks and the integrators both build on them."""
