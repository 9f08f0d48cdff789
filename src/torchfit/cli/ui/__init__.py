"""Presentation: the only package that imports rich, and only when it renders.

`--json` output never goes through here, so machine-readable runs never pay for
rich's import. One module per thing shown: console.py (the one Console and the text
helpers), errors.py (every error, rendered the same way: what failed, why, how to fix
it), output.py (files an option names), plan.py, facts.py, verify.py, doctor.py, matrix.py.
"""
