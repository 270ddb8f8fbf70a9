"""The maths layer: NumPy computations only (attention, masks, positions, blocks, backward, cost).

Imports nothing above it: no lesson, state, view, classroom or web module."""
