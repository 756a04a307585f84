"""The write side: the gate, retain (one module per step) and the lifecycle of a fact, derived
facts' review cascade, the review queue, the vector queue, misses."""
