"""One module per experiment page, named as its notebook: the data it hands the pipeline, its tables and its claims
(its knobs: `configs/<notebook>.py`)."""
