"""Code as a source: symbols parsed with real grammars (tree-sitter), and the local symbol graph.

Everything here runs on the agent's machine and reads only the local checkout: no code is
sent to the bank. `symbols` is the parsing layer (definitions by qualified name, for symbol
anchors and the graph); `graph` is the incremental index the `factbank code` commands and the
code tools read.
"""
