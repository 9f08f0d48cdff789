"""`torchfit install`: a plan or a lock becomes a checked environment at PREFIX.

flow (the install job), sources (indexes and pip configuration), backends (uv, pip),
buildcheck (is the built torch the planned one), nccl (the NCCL pin), pyenv (the
plan's interpreter), prefix (the lock, the temporary env, the swap, the log).
"""
