"""The write side: the gate, retain and the lifecycle of a fact, staleness, the vector queue."""
