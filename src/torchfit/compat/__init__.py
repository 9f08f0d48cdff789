"""The pure core: host facts, the compatibility matrix and the resolver.

Nothing in this package runs a subprocess, touches the network, loads native
libraries or draws on a terminal; it takes values and returns values
(tests/compat/test_purity.py enforces it).
"""
