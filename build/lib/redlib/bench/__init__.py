"""`make bench`: measuring the pipeline's speed and memory (run) and judging it against targets (report)."""
