"""Redaction: the secret scanners, their rules and the name/value pair shapes. Below the store,
the read and the write side alike: everything stored or echoed passes through it."""
