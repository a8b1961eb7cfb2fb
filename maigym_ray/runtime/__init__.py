"""The cluster runtime: the topology (where each role runs), placement (the Ray options built from it), Ray
start-up, and the session that brings a run's roles up and down; the eval, training and synthesis stages that
the CLIs run sit on top of it."""
