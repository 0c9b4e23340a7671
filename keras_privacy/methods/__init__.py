"""Trainers with a custom `train_step`, each trained by `fit`: the initialisation phases, SPAct,
VITA and meta generalisation. `trainer` is the backend-neutral `StatelessTrainer` (its step is
`keras_privacy.backend`'s); `steps` holds the helpers every method's step shares."""
