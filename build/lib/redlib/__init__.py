"""redlib: the library behind the RED paper companion (configs, training loop, experts, results, plots)."""

__version__ = "0.1.0"
