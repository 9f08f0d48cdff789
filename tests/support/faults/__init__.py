"""On PYTHONPATH in fault tests: sitecustomize.py loads torchfit_faults (see there)."""
