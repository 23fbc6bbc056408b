"""The artifacts: one module per make target, `<target with - as _>.py` (fig-vram -> fig_vram.py).

Each holds everything its target makes (table, notes, gates, the paper's numbers and, for a fig-*
target, its figure) and ends in `ARTIFACT = Artifact(...)`, the protocol analysis/driver.py states
and runs; the engine they share (driver, claims, common, repeats, draw, profiles) lives one level
up, in analysis/.
"""
