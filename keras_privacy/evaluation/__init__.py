"""Evaluation: the baselines and their people detector, the metrics, the protocol (fresh target
models on anonymized data) and the report."""
