"""The compiled LDP-SGD chain on the CPU and its machinery: the loop (``sgd_loop``) and
its step sizes, the one kernel a model and mechanism plug their callbacks into
(``sgd``), its disk cache (``cache``) and one-line compile errors, raw pointers, the
checked loop that diagnoses a non-finite run, and the users' replays (``users_loop``).

It imports :mod:`ldpsim.tasks.streams` and the helpers only: models, mechanisms,
interval methods and the GPU kernel (through ``cache``) use it, never the other way
round.
"""
