"""The book: page registry, notebook runner, result files, the paper's claims, the ledger, plots and link check."""
