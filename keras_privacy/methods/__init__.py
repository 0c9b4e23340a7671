"""Trainers with a custom `train_step`, each trained by `fit`: the initialisation phases, SPAct,
VITA and meta generalisation; `engine` is the one backend-aware module."""
