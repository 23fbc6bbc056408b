"""Benchmarks that print their figures (`make bench-*`): one module per benchmark."""
