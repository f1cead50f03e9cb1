"""Datasets: arithmetic questions (Task 1)."""
