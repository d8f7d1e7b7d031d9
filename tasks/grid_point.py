"""What a grid point's replicates share: built once per task, never once per replicate."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpsim.tasks import plugins
from ldpsim.tasks.compile_lock import in_turn
from ldpsim.tasks.kernel.sgd import compile_kernel, run_one
from ldpsim.tasks.spec import ReplicateSpec, normalize_spec
from ldpsim.tasks.stats import StreamingStats
from ldpsim.tasks.streams.seed_sequence import (
    assembled_entropy,
    entropy_words,
    generator_at,
    pcg64_state,
    replicate_states,
    uint32_words,
)
from ldpsim.tasks.streams.seeding import (
    data_stream_from_words,
    method_stream_from_words,
    stable_hash,
)
from ldpsim.tasks.validation import check_square

#: Grid points whose set-up a process keeps (the last ones used). The runner submits a
#: grid point's chunks together (a task holds one grid point's chunk, or the chunks of
#: several cheap ones); a few suffice, and the oracle's d x d covariance of a large
#: sparse model (d = 5000: 200 MB) bounds it.
SETUPS_KEPT = 4


def mechanism_variance(mechanism: Any, model: Any) -> np.ndarray:
    """The covariance ``mechanism.variance(model)`` that the mechanism adds to the
    gradient, checked to be (d, d) (:func:`ldpsim.tasks.validation.check_square`).

    Parameters
    ----------
    mechanism : Mechanism
        The grid point's privacy mechanism, built-in or a plugin's.
    model : Model
        The grid point's model, of dimension d = ``model.dim`` >= 1.

    Returns
    -------
    ndarray, shape (d, d)
        The mechanism's covariance (at d = 1 one number in any shape, as (1, 1)).

    Raises
    ------
    ValueError
        Another shape. A plugin's per-coordinate variance (a float) broadcast into
        every entry of S, off the diagonal too: the oracle's bounds were wrong at exit 0,
        as with a model's ``gradient_cov()`` of another shape
        (:meth:`ldpsim.tasks.models.base.Model.asymptotic_cov`).
    """
    return check_square(
        mechanism.variance(model), model.dim, f"The variance() of mechanism {mechanism.name!r}"
    )


@dataclass(frozen=True, eq=False)
class GridPointSetup:
    """Everything about one grid point that its replicates share.

    Built once per task (and kept per process, :func:`setup_of`): the normalized
    spec with its model, mechanism and methods, the segment ends the kernel records,
    the compiled kernel and its arguments, the oracle's covariance, the hashes that
    key the random streams. A replicate then costs its SGD steps and each method's
    own arithmetic.

    Attributes
    ----------
    spec : ReplicateSpec
        The normalized spec.
    cuts : ndarray of int64
        Segment ends every method needs, at every checkpoint
        (:func:`replicate_cuts`).
    asymptotic_cov : ndarray (d, d)
        The model's Sigma for the run's mechanism and batch (the oracle's).
    path_words : tuple of 4 ints
        :func:`ldpsim.tasks.streams.seeding.stable_hash` of the spec's path key.
    method_words : dict label -> tuple of 4 ints
        The same of each random method's key (``uses_rng``).
    cold_methods : set of str
        Labels of the methods no replicate of this set-up has called yet: a replicate
        warms those up first (:mod:`ldpsim.tasks.warm_up`); empty, it costs nothing.

    The streams of a replicate are numpy's ``PCG64(SeedSequence(...))`` of SPEC section
    6, seeded by :func:`ldpsim.tasks.streams.seed_sequence.pcg64_state` from the words computed
    here (the same states, a tenth of the time); each thread reuses one Generator per
    random method, set to the replicate's state.
    """

    spec: ReplicateSpec
    cuts: np.ndarray
    asymptotic_cov: np.ndarray
    path_words: tuple[int, ...]
    method_words: dict[str, tuple[int, ...]]
    kernel: Any
    kernel_args: tuple
    truth: np.ndarray
    radius: float | None
    own_estimate: bool
    generators: threading.local = field(default_factory=threading.local, repr=False)
    cold_methods: set[str] = field(default_factory=set, repr=False)

    @classmethod
    def of(cls, spec: Mapping[str, Any] | ReplicateSpec) -> GridPointSetup:
        """The set-up of ``spec`` (a mapping is normalized first, see
        :func:`ldpsim.tasks.spec.normalize_spec`)."""
        rs = spec if isinstance(spec, ReplicateSpec) else normalize_spec(spec)
        model, mechanism = rs.model, rs.mechanism
        model_params = np.ascontiguousarray(model.params(), dtype=np.float64)
        mech_params = np.ascontiguousarray(mechanism.params(model), dtype=np.float64)
        theta0 = np.ascontiguousarray(rs.theta0, dtype=np.float64)
        cuts = np.ascontiguousarray(replicate_cuts(rs), dtype=np.int64)
        # The GPU backend's kernel is compiled at its first launch (run_gpu).
        kernel = compile_kernel(*kernel_key(rs)) if rs.backend == "cpu" else None
        return cls(
            spec=rs,
            cuts=cuts,
            asymptotic_cov=unwritable(
                model.asymptotic_cov(mechanism_variance(mechanism, model), rs.batch)
            ),
            path_words=stable_hash(rs.path_key()),
            method_words={
                label: stable_hash(rs.method_key(label))
                for label, method in rs.methods.items()
                if method.uses_rng
            },
            kernel=kernel,
            kernel_args=(model_params, mech_params, theta0, float(rs.c), float(rs.gamma)),
            truth=model.truth(),
            radius=model.constraint_radius(),
            own_estimate=any(method.own_estimate for method in rs.methods.values()),
            cold_methods=set(rs.methods),
        )

    def run_kernel(self, cuts: np.ndarray, state: np.ndarray) -> tuple:
        """The compiled kernel on ``cuts`` from the PCG64 ``state`` (advanced in place)."""
        return run_one(self.kernel, *self.kernel_args, int(self.spec.batch), cuts, state)

    def run_chains(self, reps) -> tuple[np.ndarray, ...]:
        """Replicates ``reps``' LDP-SGD runs, seeded and run in one compiled call.

        Each replicate's data stream is seeded in compiled code from the grid point's
        seed words (the state :meth:`data_state` gives) and its chain run by the
        kernel's own loop, with no Python per replicate.

        Parameters
        ----------
        reps : sequence of int
            Replicates, >= 0, in any order (repeats allowed).

        Returns
        -------
        tuple of ndarray
            The kernel's outputs stacked along a first axis of replicates: ``theta``
            (R, d), ``seg_dev``, ``seg_shift``, ``snap_t``, ``snap_b`` (R, K, d),
            ``snap_a`` (R, K, d, d or 1) and ``snap_theta`` (R, K, d), K =
            ``len(cuts)``. Row i of each is, bit for bit, what :meth:`run_kernel`
            returns on ``cuts`` from :meth:`data_state` ``(reps[i])`` (:func:`gpu_row`
            takes it out). On the GPU backend: :meth:`run_gpu`, the same layout.

        Notes
        -----
        Memory: R times one replicate's outputs, which a caller bounds by the size of
        its chunks (``snap_a`` holds K d^2 numbers a replicate where a method needs all
        of A).
        """
        if self.spec.backend == "gpu":
            return self.run_gpu(list(reps))
        reps = np.ascontiguousarray(reps, dtype=np.int64)
        states = np.empty((reps.size, 4), dtype=np.uint64)  # where each chain ends: unused
        return self.kernel(
            *self.kernel_args, int(self.spec.batch), self.cuts, self.prefix, reps, states
        )

    def run_gpu(
        self, reps: Sequence[int] | np.ndarray, times: Any = None
    ) -> tuple[np.ndarray, ...]:
        """Replicates ``reps`` on the GPU, in one launch (:mod:`ldpsim.tasks.gpu.kernel`).

        Returns the kernel's outputs stacked along a first axis of replicates: row i of
        each array is what :meth:`run_kernel` returns for ``reps[i]`` (:func:`gpu_row`),
        for the statistics the methods read. When every method is ldpsim's own, the
        launch transfers only those (:attr:`gpu_points`): ``seg_dev`` is then NaN, and
        so are ``snap_b``, ``snap_a`` and ``snap_theta`` at cuts that are neither the
        last nor a checkpoint. Each replicate draws from its own Philox stream: the grid
        point's key (:attr:`gpu_key`) with the replicate's number as the counter's
        upper words, made on the device. ``times``: a
        :class:`ldpsim.tasks.gpu.kernel.LaunchTimes`, filled with the launch's stages.
        """
        from ldpsim.tasks.gpu.kernel import run_gpu_replicates

        rs = self.spec
        return run_gpu_replicates(
            rs.model.name,
            rs.mechanism.name,
            *self.kernel_args,
            int(rs.batch),
            self.cuts,
            self.gpu_points,
            self.gpu_key,
            np.asarray(reps, dtype=np.int64),
            needs_full_matrix(rs),
            times,
        )

    @functools.cached_property
    def gpu_key(self) -> tuple[int, int]:
        """The Philox key of this grid point's GPU streams
        (:func:`ldpsim.tasks.streams.philox.grid_point_key` of :attr:`entropy`)."""
        from ldpsim.tasks.streams.philox import grid_point_key

        return grid_point_key(self.entropy)

    @functools.cached_property
    def gpu_points(self) -> np.ndarray:
        """Positions among the cuts where a GPU launch records b, A and the iterate.

        ldpsim's own methods read those at the evaluation points only (the last step,
        and each checkpoint: :meth:`ldpsim.tasks.stats.StreamingStats.prefix`), and T
        and the centre at every cut. A method of a plugin may read anything: then every
        cut is a point, and the launch transfers all.
        """
        own = all(
            type(method).__module__.startswith("ldpsim.tasks.")
            for method in self.spec.methods.values()
        )
        if not own:
            return np.arange(self.cuts.size, dtype=np.int64)
        ends = np.array([*(self.spec.checkpoints or ()), self.spec.n], dtype=np.int64)
        return np.unique(np.searchsorted(self.cuts, ends)).astype(np.int64)

    def stats(self, raw: tuple) -> StreamingStats:
        """The streaming statistics of the kernel's output ``raw`` (:meth:`run_kernel`)."""
        return StreamingStats(**self.stats_fields(raw))

    def stats_fields(self, raw: tuple) -> dict[str, Any]:
        """The fields of the statistics of the kernel's outputs ``raw``, one replicate's
        (:class:`StreamingStats`) or stacked over replicates
        (:class:`ldpsim.tasks.stats.StackedStats`)."""
        _, seg_dev, seg_shift, snap_t, snap_b, snap_a, snap_theta = raw
        return dict(
            n=self.spec.n,
            cuts=self.cuts,
            seg_dev=seg_dev,
            seg_shift=seg_shift,
            snap_t=snap_t,
            snap_b=snap_b,
            snap_a=snap_a,
            snap_theta=snap_theta,
            gamma=self.spec.gamma,
            asymptotic_cov=self.asymptotic_cov,
        )

    @functools.cached_property
    def entropy(self) -> list[int]:
        """The 32-bit words of the entropy every stream of the grid point starts with:
        the seed's and the path key's
        (:func:`ldpsim.tasks.streams.seed_sequence.entropy_words`)."""
        return entropy_words([self.spec.seed, *self.path_words])

    @functools.cached_property
    def spawn_keys(self) -> dict[str, list[int]]:
        """The words of each random method's spawn key (its ``method_words``)."""
        return {label: entropy_words(words) for label, words in self.method_words.items()}

    @functools.cached_property
    def numpy_streams(self) -> bool:
        """Whether the method streams must be numpy's own Generators (with their seed
        sequence): with checkpoints, or a random method that is not ldpsim's."""
        plugin = any(
            method.uses_rng and not type(method).__module__.startswith("ldpsim.")
            for method in self.spec.methods.values()
        )
        return bool(self.spec.checkpoints) or plugin

    @functools.cached_property
    def prefix(self) -> np.ndarray:
        """:attr:`entropy` as a uint32 array: the words compiled seeding starts from
        (:func:`ldpsim.tasks.streams.seed_sequence.replicate_states`)."""
        return np.array(self.entropy, dtype=np.uint32)  # writable: compiled code is typed so

    def data_states(self, reps) -> np.ndarray:
        """The PCG64 states (uint64, (R, 4)) at which replicates ``reps``' data streams
        start, in one compiled call: row i is :meth:`data_state` ``(reps[i])``."""
        reps = np.ascontiguousarray(reps, dtype=np.int64)
        return in_turn(replicate_states)(self.prefix, reps, np.empty(0, dtype=np.uint32))

    def method_states(self, label: str, reps, point: int | None = None) -> np.ndarray:
        """The PCG64 states (uint64, (R, 4)) at which the random method ``label``'s
        streams of replicates ``reps`` start, in one compiled call.

        Row i is the state of ``method_streams(reps[i])[label]``, or with a checkpoint
        ``point`` < n of ``ldpsim.tasks.replicate.checkpoint_stream`` of that stream
        (a child of its seed sequence, spawn key extended by ``point``). The point n,
        or None, is the method's own stream, as a replicate uses it at n. A Generator
        on such a state draws, as it starts, what those streams draw
        (:func:`ldpsim.tasks.intervals.bootstrap_bounds.multiplier_bounds` draws bb's
        multipliers from them directly).

        Parameters
        ----------
        label : str
            A method of the spec that draws random numbers (a key of
            :attr:`method_words`).
        reps : sequence of int
            Replicates, >= 0.
        point : int, optional
            A checkpoint of the spec, or n.

        Raises
        ------
        KeyError
            ``label`` is not a random method of the spec.
        """
        key = list(self.spawn_keys[label])
        if point is not None and int(point) != self.spec.n:
            key += uint32_words(int(point))
        reps = np.ascontiguousarray(reps, dtype=np.int64)
        return in_turn(replicate_states)(self.prefix, reps, np.array(key, dtype=np.uint32))

    def data_state(self, rep: int) -> np.ndarray:
        """The PCG64 state (uint64, (4,)) at which replicate ``rep``'s data stream starts:
        that of :meth:`data_stream`."""
        words = np.array([*self.entropy, *uint32_words(rep)], dtype=np.uint32)
        return in_turn(pcg64_state)(words)

    def data_stream(self, rep: int) -> np.random.Generator:
        """Replicate ``rep``'s data-and-noise stream
        (:func:`ldpsim.tasks.streams.seeding.data_stream`)."""
        return data_stream_from_words(self.spec.seed, self.path_words, rep)

    def method_streams(self, rep: int) -> dict[str, np.random.Generator]:
        """Replicate ``rep``'s stream of every random method (``method_stream``).

        Each is this thread's Generator of that method, set to the stream's start, when
        only ldpsim's own methods draw and there are no checkpoints; otherwise numpy's own
        Generators: a checkpoint's stream is a child of the stream's seed sequence
        (:func:`ldpsim.tasks.replicate.checkpoint_stream`), and a plugin may spawn
        children too (``rng.spawn``), which needs the seed sequence.
        """
        if self.numpy_streams:
            return {
                label: method_stream_from_words(self.spec.seed, self.path_words, rep, words)
                for label, words in self.method_words.items()
            }
        generators = getattr(self.generators, "by_label", None)
        if generators is None:
            generators = {
                label: np.random.Generator(np.random.PCG64()) for label in self.method_words
            }
            self.generators.by_label = generators
        entropy = [*self.entropy, *uint32_words(rep)]
        for label, spawn_key in self.spawn_keys.items():
            state = in_turn(pcg64_state)(assembled_entropy(entropy, spawn_key))
            generator_at(generators[label].bit_generator, state)
        return generators


def unwritable(values: Any) -> np.ndarray:
    """A float copy of ``values`` that cannot be written: a set-up's array that every
    chunk of its grid point shares (a method writing into ``stats.asymptotic_cov``
    raises, and so fails its cell, instead of changing the later chunks' numbers)."""
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


def gpu_row(outputs: tuple[np.ndarray, ...], i: int) -> tuple[np.ndarray, ...]:
    """Replicate i's kernel output from :meth:`GridPointSetup.run_gpu`'s stacked arrays."""
    return tuple(output[i] for output in outputs)


def replicate_cuts(rs: ReplicateSpec) -> np.ndarray:
    """Segment ends the kernel must record: every method's partition at every checkpoint,
    the checkpoints, and the powers of two (extra recentring points)."""
    n = rs.n
    parts = [np.array([n], dtype=np.int64), 2 ** np.arange(0, n.bit_length(), dtype=np.int64)]
    for point in rs.checkpoints or (n,):
        parts.append(np.array([point], dtype=np.int64))
        for method in rs.methods.values():
            if method.own_estimate:
                continue  # computes from the users, not from the run's segments
            try:
                parts.append(method.cuts(point, rs.gamma))
            except ValueError:
                continue  # cannot be computed at this checkpoint; recorded as a failure
    cuts = np.unique(np.concatenate(parts))
    return cuts[(cuts >= 1) & (cuts <= n)]


def kernel_key(rs: ReplicateSpec) -> tuple:
    """The arguments of :func:`ldpsim.tasks.kernel.sgd.compile_kernel` for ``rs``: its
    kernel's key.

    The model's and the mechanism's callbacks, d, the lengths of their parameter
    vectors, the model's projection and whether A is kept in full.
    """
    model, mechanism = rs.model, rs.mechanism
    return (
        type(model).sample_gradient,
        mechanism.callback(),
        int(np.asarray(rs.theta0).size),
        int(np.asarray(model.params()).size),
        int(np.asarray(mechanism.params(model)).size),
        type(model).project,
        needs_full_matrix(rs),
    )


def needs_full_matrix(rs: ReplicateSpec) -> bool:
    """Whether a method of ``rs`` reads the whole d x d matrix A of the self-normalizer.

    Otherwise the kernel keeps only its diagonal: a step then costs O(d), not O(d^2).
    """
    return any(method.needs_full_matrix for method in rs.methods.values())


def spec_token(spec: Mapping[str, Any]) -> str:
    """The JSON text of a spec mapping, keys in their order (the methods' order is kept)."""
    return json.dumps(spec, default=repr)


@functools.lru_cache(maxsize=SETUPS_KEPT)
def _setup_of_token(token: str, generation: int) -> GridPointSetup:
    # ``generation`` (plugins.generation): a unit registered again under its name (an
    # edited class re-run in a notebook) makes the set-ups of the old one unused.
    return GridPointSetup.of(json.loads(token))


def setup_of(spec: Mapping[str, Any]) -> GridPointSetup:
    """The set-up of the grid point ``spec``, built at most once per process while it is
    among the last :data:`SETUPS_KEPT` used.

    So a model's or mechanism's objects, and whatever they compute when built or in
    ``asymptotic_cov``, are built once per process and grid point, not per replicate.
    Specs are compared by their canonical JSON; a spec that JSON cannot round-trip
    (e.g. holding a numpy array) is set up anew each call.
    """
    token = spec_token(spec)
    try:
        same = json.loads(token) == spec
    except ValueError:
        same = False
    if not same:
        return GridPointSetup.of(spec)
    return _setup_of_token(token, plugins.generation())
