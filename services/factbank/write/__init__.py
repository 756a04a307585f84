"""The write side: the gate, redaction, claim comparison, retain and the lifecycle of a fact."""
