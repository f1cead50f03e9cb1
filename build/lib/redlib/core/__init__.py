"""Runtime (paths, seeds, devices), configs, the stage cache, the one fit loop, metrics and claim measurements."""
