"""The Asimov language: its grammar (grammar.lark), the parser that reads a spec with lark
(parser), the typed tree of a spec (nodes) and the step from lark's parse to that tree
(builder). Knows nothing of Asicmon's catalogue: checking a tree is checking/'s."""
