"""`make gpu-check` (`python -m run.checks`): every GPU code path at tiny scale, each asserted."""
