"""Random streams: numpy's PCG64 and its samplers compiled inline (``rng``, on numpy's
ziggurat tables), seed sequences, the seeding of a replicate's streams, bb's
multipliers, and the GPU's Philox streams.

Below every other part of ``ldpsim.tasks`` but the helpers (validation, warnings, stats):
it imports numpy, numba and those only.
"""
