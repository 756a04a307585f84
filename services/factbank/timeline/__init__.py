"""The timeline of a project: sessions, file touches, commands, handoffs and conflicts."""
