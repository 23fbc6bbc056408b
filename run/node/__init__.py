"""The node: what the machine offers and how a rank is placed on it.

probe (GPUs, CUDA, cores, NUMA nodes, nsys), numa (binding ranks), toolchain (can torch.compile
build kernels here), provenance (versions and git state beside every result), profiling (windows,
trace file names, the nsys command line; no torch) and profilers (the rank's no-op, torch and nsys
profilers), bundle (one archive to attach to a bug report). Imports only store and errors below it.
"""
