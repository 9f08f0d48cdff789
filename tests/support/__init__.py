"""Test helpers that run in other processes: fault injection for the verify workers."""
