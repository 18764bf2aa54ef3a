"""The JAX backend: JAX's compile events, cache_state classification, the fixture, census."""
