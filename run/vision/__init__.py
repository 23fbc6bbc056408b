"""The vision workload: torchvision MobileNetV2 on MNIST under DDP (experiments V1-V11, O1-O2)."""
