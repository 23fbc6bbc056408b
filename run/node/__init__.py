"""The node: what the machine offers and how a rank is placed on it.

probe (GPUs, CUDA, cores, NUMA nodes, nsys), numa (binding ranks), provenance (versions and git
state beside every result), profiling (windows and trace file names, the nsys command line),
bundle (one archive to attach to a bug report). Imports only store and errors below it.
"""
