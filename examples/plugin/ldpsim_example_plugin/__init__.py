"""An example ldpsim plugin: a model, a mechanism and an interval method (docs/extending.md)."""
