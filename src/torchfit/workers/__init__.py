"""Scripts that `torchfit verify` runs with the TARGET environment's Python.

They use only the standard library and torch, never torchfit: the environment
being verified need not have torchfit installed. `inspect_worker.py` inspects
one process; `ddp_worker.py` is the torchrun worker of the DDP smoke test and
the bandwidth sweep; `torchfit_runtime.py` is what both share (which libnccl,
libcudnn and libcudart are really mapped, and their versions, via ctypes).
The orchestrator side (verify.py) turns their raw JSON lines into checks.
"""
