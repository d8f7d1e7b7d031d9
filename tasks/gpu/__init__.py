"""The GPU backend's kernel (numba-cuda): one CUDA thread per replicate (``kernel``), the
device versions of the models' and mechanisms' callbacks (``units``), on the Philox
streams of :mod:`ldpsim.tasks.streams.philox`.

It imports :mod:`ldpsim.tasks.streams` and the helpers only.
"""
