"""One module per experiment page: its config, its data handed to the pipeline, its tables and its claims."""
