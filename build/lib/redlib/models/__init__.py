"""Modules: the Hugging Face backbone with its frozen prefix, experts, routers and the ways to combine them."""
