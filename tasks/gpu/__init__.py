"""The GPU backend's kernel (numba-cuda): one CUDA thread per replicate (``kernel``), the
device versions of the models' and mechanisms' callbacks (``units``), on the Philox
streams of :mod:`ldpsim.tasks.streams.philox`.

Its kernel is a template (``kernel_loop``) compiled through the CPU kernels' disk cache
(:mod:`ldpsim.tasks.kernel.cache`). It imports that, :mod:`ldpsim.tasks.streams` and the
helpers only.
"""
