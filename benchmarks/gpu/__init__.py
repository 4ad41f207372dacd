"""The GPU suite: the gpu-marked tests, quality and speed in one command (docs/gpu.md)."""
