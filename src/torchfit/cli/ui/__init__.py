"""Presentation: the only package that imports rich, and only when it renders.

`--json` output never goes through here, so machine-readable runs never pay for
rich's import; every other word a command shows does (cli/commands/ prints JSON dumps only).
One module per thing shown: console.py (the one Console and the text helpers), errors.py
(every error, rendered the same way: what failed, why, how to fix it), output.py (files an
option names, stdout's machine text, the "wrote X" lines), plan.py, facts.py, verify.py,
doctor.py, matrix.py, install.py, fleet.py, docs.py, slurm.py, config.py.
"""
