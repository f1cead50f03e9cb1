"""The speed of a 2-core machine, kept apart from the paper's code: none of it changes a number.

- `kernels`: which fp32 matrix kernels torch uses on this CPU (MKL or oneDNN), recorded in every provenance;
- `parallel`: the worker processes a page trains its independent pieces in, bit-identical to a serial run;
- `usage`: the peak memory and CPU seconds of a page and its workers together.
The benchmark that measures all of this is `redlib/bench` (`make bench`); the Speed page shows it.
"""
