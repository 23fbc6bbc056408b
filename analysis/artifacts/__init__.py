"""The artifacts: one module per make target, `<target with - as _>.py` (fig-vram -> fig_vram.py).

Each holds one table or figure's table, notes, gates and the paper's numbers, in the contract that
analysis/driver.py states and runs; the engine they share (driver, claims, common, repeats,
profiles) lives one level up, in analysis/.
"""
