"""What run.node.probe.probe() says on a 2-core machine without a GPU, for tests that fake hardware."""

CPU2 = {
    "gpu_count": 0,
    "gpu_model": None,
    "gpus": [],
    "cpu_count": 2,
    "affinity_cpus": 2,
    "nsys": None,
    "gpus_on_node": 0,
}
