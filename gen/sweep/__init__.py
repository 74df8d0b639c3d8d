"""Design-space sweeps on Dask: ``specgen sweep SPEC.toml`` (:mod:`gen.sweep.cli`)."""
