"""The plumbing of ldpsim: sweeps, Dask execution, the Zarr store, summaries, CLI."""
