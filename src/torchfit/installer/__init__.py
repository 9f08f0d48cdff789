"""The edge: probes, installs, verify, doctor, the CLI."""
