"""`torchfit matrix check|update|probe`: the matrix against the live indexes and the wheels."""
