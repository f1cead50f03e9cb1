"""The task-agnostic RED pipeline: stages -> run record, the method registry, and cost counts."""
