"""Training (`translator train`): the run loop (loop.py) drives epoch ends (epoch_end.py),
which drive the Trainer (trainer.py); below them its state and resume, the schedule, the
optimiser, torchrun, the out-of-memory guard and TensorBoard."""
