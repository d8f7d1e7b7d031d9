"""`python -m ldpsim.tasks`: one replicate of each paper model, printed per coordinate."""

from __future__ import annotations

from ldpsim.tasks.replicate import run_replicate

PAPER_MODELS = (
    {"model": "quantile", "tau": 0.5, "eps": 1.0, "n": 10**6},
    {"model": "quantile_regression", "tau": 0.5, "coef": [0, 0, 1, -1], "eps": 1.0, "n": 10**6},
)


def main() -> None:
    for spec in PAPER_MODELS:
        result = run_replicate(spec, rep=0)
        print(f"{spec['model']} (eps = {spec['eps']}, n = {spec['n']:.0e}, 90% intervals)")
        for j, (est, true) in enumerate(zip(result.estimate, result.truth, strict=True)):
            print(f"  coord {j}: estimate {est:+.5f}  truth {true:+.5f}")
            for label in result.lower:
                lo, hi = result.lower[label][j], result.upper[label][j]
                print(f"    {label:<7} [{lo:+.5f}, {hi:+.5f}]  length {hi - lo:.5f}")
        print(f"  {result.seconds:.2f} s")


if __name__ == "__main__":
    main()
