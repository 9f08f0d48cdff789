"""Loads torchfit_faults in every Python started with this directory on PYTHONPATH.

A test hook for torchfit verify's workers (see torchfit_faults.py), never shipped:
only the tests that inject faults, and scripts/gpu-check.sh, put this directory
on PYTHONPATH. Without TORCHFIT_VERIFY_FAULT it does nothing.
"""

import os

if os.environ.get("TORCHFIT_VERIFY_FAULT"):
    import torchfit_faults

    torchfit_faults.install()
