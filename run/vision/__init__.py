"""The vision workload: torchvision MobileNetV2 on MNIST under DDP (experiments V1-V11, O1-O2).

`python -m run.vision --spec RUN/spec.json --run-dir RUN` trains one run (under torchrun).
"""
